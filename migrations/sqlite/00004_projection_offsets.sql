-- +goose Up

-- projection_offsets holds, for each consumer group of an asynchronous
-- projection (its name and version), the position of the last event of
-- the log it has applied. The subscriber commits it in the transaction
-- that holds the projection's writes, so a read model and its offset
-- never disagree. A group starts at 0, before every event.
CREATE TABLE projection_offsets (
    consumer_group TEXT    PRIMARY KEY,
    last_position  INTEGER NOT NULL CHECK (last_position >= 0)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE projection_offsets;
