-- +goose Up

-- events holds every stream. The primary key (stream, version) is the
-- optimistic concurrency guard: two appends at one version cannot both commit.
-- transaction_id orders the log by commit: readers take only events whose
-- transaction is older than every transaction still in flight
-- (pg_snapshot_xmin), so a slow transaction is never passed over.
CREATE TABLE events (
    position       bigint GENERATED ALWAYS AS IDENTITY,
    transaction_id xid8        NOT NULL DEFAULT pg_current_xact_id(),
    id             uuid        NOT NULL UNIQUE,
    stream         text        NOT NULL,
    version        bigint      NOT NULL CHECK (version > 0),
    type           text        NOT NULL,
    data           jsonb       NOT NULL,
    metadata       jsonb       NOT NULL DEFAULT '{}',
    recorded_at    timestamptz NOT NULL,
    PRIMARY KEY (stream, version)
);

CREATE INDEX events_log ON events (transaction_id, position);

-- outbox_messages holds side effects until they are delivered. due_at is
-- when a message may next be claimed: its creation, its retry time, or the
-- end of its lease while a relay holds it. Buried messages stay, with
-- buried_at set, for an operator; the partial index serves due ones only.
CREATE TABLE outbox_messages (
    id         uuid        PRIMARY KEY,
    topic      text        NOT NULL,
    payload    json        NOT NULL,
    created_at timestamptz NOT NULL,
    due_at     timestamptz NOT NULL,
    attempts   integer     NOT NULL DEFAULT 0,
    last_error text,
    buried_at  timestamptz
);

CREATE INDEX outbox_messages_due ON outbox_messages (due_at, id) WHERE buried_at IS NULL;
CREATE INDEX outbox_messages_buried ON outbox_messages (buried_at) WHERE buried_at IS NOT NULL;

-- +goose Down
DROP TABLE outbox_messages;
DROP TABLE events;
