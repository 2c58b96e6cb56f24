-- +goose Up

-- The inline projections of the organizations domain, written in the same
-- transaction as the events they follow, and rebuilt from the events
-- alone. Times are INTEGER microseconds since 1970-01-01 UTC and UUIDs
-- TEXT, as in the event store and the user views; text sorts by its bytes,
-- which for UTF-8 is by code point, as the PostgreSQL backend sorts names.
--
-- No foreign key ties these tables to each other or to the user views:
-- each domain's views are reset and rebuilt on their own, as on
-- PostgreSQL, whose tables these mirror.

-- organizations holds each organization there is.
CREATE TABLE organizations (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- org_members holds each member of an organization, with its role; an
-- account's organizations are found by its user_id.
CREATE TABLE org_members (
    org_id    TEXT    NOT NULL,
    user_id   TEXT    NOT NULL,
    role      TEXT    NOT NULL,
    joined_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, user_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX org_members_user_id ON org_members (user_id);

-- org_invitations maps the SHA-256 of an unused invitation code to its
-- invitation, pending until it is accepted, revoked or voided, or until
-- the sweep deletes it once it has expired. The address is in the clear,
-- as in the user views; its row goes with the address's erasure.
CREATE TABLE org_invitations (
    code_hash  TEXT    PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    org_id     TEXT    NOT NULL,
    email      TEXT    NOT NULL,
    role       TEXT    NOT NULL,
    invited_by TEXT    NOT NULL,
    sent_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX org_invitations_org_id ON org_invitations (org_id);
CREATE INDEX org_invitations_email ON org_invitations (email);
CREATE INDEX org_invitations_expires_at ON org_invitations (expires_at);

-- +goose Down
DROP TABLE org_invitations;
DROP TABLE org_members;
DROP TABLE organizations;
