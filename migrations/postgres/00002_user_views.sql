-- +goose Up

-- The inline projections of the user domain, written in the same
-- transaction as the events they follow, and rebuilt from the events alone
-- by `app projections rebuild`.

-- users is also the address-to-user index: the unique address is what keeps
-- two accounts from ever holding one address, even under concurrent
-- requests. It is deferrable so that a rebuild, which replays streams in
-- commit order, may pass through states a live system never shows.
CREATE TABLE users (
    id         uuid        PRIMARY KEY,
    email      text        NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT users_email_key UNIQUE (email) DEFERRABLE INITIALLY IMMEDIATE
);

-- sessions maps the SHA-256 of a session token to its user.
CREATE TABLE sessions (
    token_hash text        PRIMARY KEY,
    user_id    uuid        NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_user_id ON sessions (user_id);

-- signin_codes maps the SHA-256 of an unused sign-in code to its address.
CREATE TABLE signin_codes (
    code_hash  text        PRIMARY KEY,
    email      text        NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX signin_codes_email ON signin_codes (email);

-- email_change_codes maps the SHA-256 of an unused confirmation code to its
-- user.
CREATE TABLE email_change_codes (
    code_hash  text        PRIMARY KEY,
    user_id    uuid        NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX email_change_codes_user_id ON email_change_codes (user_id);

-- +goose Down
DROP TABLE email_change_codes;
DROP TABLE signin_codes;
DROP TABLE sessions;
DROP TABLE users;
