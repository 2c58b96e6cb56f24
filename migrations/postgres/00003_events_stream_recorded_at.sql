-- +goose Up

-- events_stream_recorded_at serves LoadSince: the events of one stream
-- recorded since a time, without reading the stream's older events. The
-- stream's head version still comes from the primary key (stream, version).
-- The index is built in the migration's transaction, which blocks appends
-- while it is built. On a large table an operator may build it beforehand
-- with CREATE INDEX CONCURRENTLY under this name, and check that it is valid
-- (pg_index.indisvalid): the migration then keeps it.
CREATE INDEX IF NOT EXISTS events_stream_recorded_at ON events (stream, recorded_at);

-- +goose Down
DROP INDEX events_stream_recorded_at;
