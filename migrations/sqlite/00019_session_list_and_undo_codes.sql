-- +goose Up

-- What the owner's list of sessions shows of each: its ID (that of the
-- event that started it), when it started, and the client that started
-- it. The sessions there are take theirs from the events that started
-- them, found by their stream, the account's. SQLite cannot add a NOT NULL
-- column without a default, so the table is made anew.
CREATE TABLE sessions_new (
    token_hash TEXT    PRIMARY KEY,
    user_id    TEXT    NOT NULL,
    id         TEXT    NOT NULL UNIQUE,
    started_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    client     TEXT    NOT NULL DEFAULT ''
) STRICT, WITHOUT ROWID;
-- A session no event started cannot be listed or ended by its ID; a
-- rebuild of the views would not make it either, so it is left out.
INSERT INTO sessions_new (token_hash, user_id, id, started_at, expires_at, client)
SELECT s.token_hash, s.user_id, e.id, e.recorded_at, s.expires_at, coalesce(json_extract(e.data, '$.client'), '')
  FROM sessions s
  JOIN events e ON e.stream = 'user-' || s.user_id
               AND e.type = 'user.session_started'
               AND json_extract(e.data, '$.token_hash') = s.token_hash;
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE INDEX sessions_user_id ON sessions (user_id);
CREATE INDEX sessions_expires_at ON sessions (expires_at);

-- session_uses holds when each session was last used, written at most
-- once a minute. No event records it, so it is kept beside the views:
-- a rebuild of the views leaves it as it is.
CREATE TABLE session_uses (
    token_hash TEXT    PRIMARY KEY,
    used_at    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- email_undo_codes maps the SHA-256 of the code that undoes a change of
-- address to its user and the change's version in the user's stream.
CREATE TABLE email_undo_codes (
    code_hash  TEXT    PRIMARY KEY,
    user_id    TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX email_undo_codes_user_id ON email_undo_codes (user_id);
CREATE INDEX email_undo_codes_expires_at ON email_undo_codes (expires_at);

-- +goose Down
DROP TABLE email_undo_codes;
DROP TABLE session_uses;
CREATE TABLE sessions_old (
    token_hash TEXT    PRIMARY KEY,
    user_id    TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO sessions_old SELECT token_hash, user_id, expires_at FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_old RENAME TO sessions;
CREATE INDEX sessions_user_id ON sessions (user_id);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
