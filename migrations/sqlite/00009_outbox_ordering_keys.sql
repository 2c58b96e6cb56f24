-- +goose Up

-- ordering_key puts a message in order among those of the same key, by seq,
-- the order in which they were inserted: a claim passes over a message while
-- one of its key with a lower seq is still held and not buried. The index
-- serves that check. seq is taken from outbox_sequence by the inserting
-- transaction, which holds SQLite's one write lock, only for keyed messages.
ALTER TABLE outbox_messages ADD COLUMN ordering_key TEXT;
ALTER TABLE outbox_messages ADD COLUMN seq INTEGER;

CREATE INDEX outbox_messages_key ON outbox_messages (ordering_key, seq) WHERE ordering_key IS NOT NULL AND buried_at IS NULL;

CREATE TABLE outbox_sequence (last INTEGER NOT NULL) STRICT;
INSERT INTO outbox_sequence (last) VALUES (0);

-- +goose Down
DROP TABLE outbox_sequence;
DROP INDEX outbox_messages_key;
ALTER TABLE outbox_messages DROP COLUMN seq;
ALTER TABLE outbox_messages DROP COLUMN ordering_key;
