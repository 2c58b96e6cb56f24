-- +goose Up

-- The inline projections of the user domain, written in the same
-- transaction as the events they follow, and rebuilt from the events alone
-- by `app projections rebuild`. Times are INTEGER microseconds since
-- 1970-01-01 UTC and UUIDs TEXT, as in the event store.

-- users is also the address-to-user index: the unique address is what keeps
-- two accounts from ever holding one address. SQLite has one writer at a
-- time and its log is in exact commit order, so a rebuild replays only
-- states the live system passed through, and the index needs no deferral
-- (SQLite could not defer it anyway).
CREATE TABLE users (
    id         TEXT    PRIMARY KEY,
    email      TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX users_email_key ON users (email);

-- sessions maps the SHA-256 of a session token to its user.
CREATE TABLE sessions (
    token_hash TEXT    PRIMARY KEY,
    user_id    TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX sessions_user_id ON sessions (user_id);

-- signin_codes maps the SHA-256 of an unused sign-in code to its address.
CREATE TABLE signin_codes (
    code_hash  TEXT    PRIMARY KEY,
    email      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX signin_codes_email ON signin_codes (email);

-- email_change_codes maps the SHA-256 of an unused confirmation code to its
-- user.
CREATE TABLE email_change_codes (
    code_hash  TEXT    PRIMARY KEY,
    user_id    TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX email_change_codes_user_id ON email_change_codes (user_id);

-- +goose Down
DROP TABLE email_change_codes;
DROP TABLE signin_codes;
DROP TABLE sessions;
DROP TABLE users;
