-- +goose Up

-- projection_offsets holds, per consumer group (an asynchronous projection's
-- name and version), the position in the log of the last event it applied:
-- the transaction id and position of events.events_log. The subscriber
-- locks a group's row for the length of a batch and writes it in the same
-- transaction as the projection's own writes.
CREATE TABLE projection_offsets (
    consumer_group      text   PRIMARY KEY,
    last_transaction_id xid8   NOT NULL,
    last_position       bigint NOT NULL
);

-- +goose Down
DROP TABLE projection_offsets;
