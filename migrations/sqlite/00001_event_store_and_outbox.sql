-- +goose Up

-- Times are INTEGER microseconds since 1970-01-01 UTC: they sort as times
-- do, compare in SQL without parsing, and round-trip a Go time.Time at the
-- microsecond exactly, as PostgreSQL's timestamptz does. UUIDs are TEXT in
-- their canonical form; JSON is TEXT that json_valid accepts. Tables are
-- STRICT, so a value of the wrong type is refused instead of stored.

-- events holds every stream. UNIQUE (stream, version) is the optimistic
-- concurrency guard: two appends at one version cannot both commit.
-- position orders the log by commit: SQLite has one writer at a time, so
-- an event with a higher position committed no earlier than one with a lower
-- one, and none can commit behind a reader. AUTOINCREMENT keeps positions
-- from ever being reused.
CREATE TABLE events (
    position    INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT    NOT NULL UNIQUE,
    stream      TEXT    NOT NULL,
    version     INTEGER NOT NULL CHECK (version > 0),
    type        TEXT    NOT NULL,
    data        TEXT    NOT NULL CHECK (json_valid(data)),
    metadata    TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    recorded_at INTEGER NOT NULL,
    UNIQUE (stream, version)
) STRICT;

-- outbox_messages holds side effects until they are delivered. due_at is
-- when a message may next be claimed: its creation, its retry time, or the
-- end of its lease while a relay holds it. Buried messages stay, with
-- buried_at set, for an operator; the partial index serves due ones only.
CREATE TABLE outbox_messages (
    id         TEXT    PRIMARY KEY,
    topic      TEXT    NOT NULL,
    payload    TEXT    NOT NULL CHECK (json_valid(payload)),
    created_at INTEGER NOT NULL,
    due_at     INTEGER NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    buried_at  INTEGER
) STRICT, WITHOUT ROWID;

CREATE INDEX outbox_messages_due ON outbox_messages (due_at, id) WHERE buried_at IS NULL;
CREATE INDEX outbox_messages_buried ON outbox_messages (buried_at) WHERE buried_at IS NOT NULL;

-- +goose Down
DROP TABLE outbox_messages;
DROP TABLE events;
