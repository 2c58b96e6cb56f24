-- +goose Up

-- What the owner's list of sessions shows of each: its ID (that of the
-- event that started it), when it started, and the client that started
-- it. The sessions there are take theirs from the events that started
-- them, found by their stream, the account's.
ALTER TABLE sessions
    ADD COLUMN id         uuid,
    ADD COLUMN started_at timestamptz,
    ADD COLUMN client     text NOT NULL DEFAULT '';
UPDATE sessions s
   SET id = e.id, started_at = e.recorded_at, client = coalesce(e.data->>'client', '')
  FROM events e
 WHERE e.stream = 'user-' || s.user_id::text
   AND e.type = 'user.session_started'
   AND e.data->>'token_hash' = s.token_hash;
-- A session no event started cannot be listed or ended by its ID; a
-- rebuild of the views would not make it either.
DELETE FROM sessions WHERE id IS NULL;
ALTER TABLE sessions
    ALTER COLUMN id SET NOT NULL,
    ALTER COLUMN started_at SET NOT NULL;
CREATE UNIQUE INDEX sessions_id ON sessions (id);

-- session_uses holds when each session was last used, written at most
-- once a minute. No event records it, so it is kept beside the views:
-- a rebuild of the views leaves it as it is.
CREATE TABLE session_uses (
    token_hash text        PRIMARY KEY,
    used_at    timestamptz NOT NULL
);

-- email_undo_codes maps the SHA-256 of the code that undoes a change of
-- address to its user and the change's version in the user's stream.
CREATE TABLE email_undo_codes (
    code_hash  text        PRIMARY KEY,
    user_id    uuid        NOT NULL,
    version    bigint      NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX email_undo_codes_user_id ON email_undo_codes (user_id);
CREATE INDEX email_undo_codes_expires_at ON email_undo_codes (expires_at);

-- +goose Down
DROP TABLE email_undo_codes;
DROP TABLE session_uses;
DROP INDEX sessions_id;
ALTER TABLE sessions DROP COLUMN id, DROP COLUMN started_at, DROP COLUMN client;
