-- +goose Up

-- The inline projections of the organizations domain, written in the same
-- transaction as the events they follow, and rebuilt from the events alone.
--
-- No foreign key ties these tables to each other or to the user views.
-- Each domain's views are reset and rebuilt on their own (a key to users
-- would forbid truncating users alone), and a rebuild replays the log in
-- its order, by transaction, which is not always the order in which the
-- events' transactions committed: a replay may pass through states a live
-- system never shows, such as a member whose organization comes later.
-- Reset truncates the three tables together.

-- organizations holds each organization there is. Its name sorts by code
-- point (COLLATE "C"), as SQLite sorts text, so that an account's list
-- has one order on every backend.
CREATE TABLE organizations (
    id         uuid        PRIMARY KEY,
    name       text        COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL
);

-- org_members holds each member of an organization, with its role; an
-- account's organizations are found by its user_id.
CREATE TABLE org_members (
    org_id    uuid        NOT NULL,
    user_id   uuid        NOT NULL,
    role      text        NOT NULL,
    joined_at timestamptz NOT NULL,
    PRIMARY KEY (org_id, user_id)
);
CREATE INDEX org_members_user_id ON org_members (user_id);

-- org_invitations maps the SHA-256 of an unused invitation code to its
-- invitation, pending until it is accepted, revoked or voided, or until
-- the sweep deletes it once it has expired. The address is in the clear,
-- as in the user views; its row goes with the address's erasure.
CREATE TABLE org_invitations (
    code_hash  text        PRIMARY KEY,
    id         uuid        NOT NULL UNIQUE,
    org_id     uuid        NOT NULL,
    email      text        NOT NULL,
    role       text        NOT NULL,
    invited_by uuid        NOT NULL,
    sent_at    timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX org_invitations_org_id ON org_invitations (org_id);
CREATE INDEX org_invitations_email ON org_invitations (email);
CREATE INDEX org_invitations_expires_at ON org_invitations (expires_at);

-- +goose Down
DROP TABLE org_invitations;
DROP TABLE org_members;
DROP TABLE organizations;
