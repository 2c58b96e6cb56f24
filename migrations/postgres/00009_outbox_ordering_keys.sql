-- +goose Up

-- ordering_key puts a message in order among those of the same key, by seq,
-- the order in which they were inserted: a claim passes over a message while
-- one of its key with a lower seq is still held and not buried. The index
-- serves that check, one probe per candidate; it holds only what the check
-- looks for, so that no planner is tempted to combine it with the index of
-- due messages, which would cost a scan of the whole backlog per probe.
ALTER TABLE outbox_messages
    ADD COLUMN ordering_key text,
    ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;

CREATE INDEX outbox_messages_key ON outbox_messages (ordering_key, seq) WHERE ordering_key IS NOT NULL AND buried_at IS NULL;

-- +goose Down
DROP INDEX outbox_messages_key;
ALTER TABLE outbox_messages DROP COLUMN seq, DROP COLUMN ordering_key;
