-- +goose Up

-- A stream's recent stretch is found from its head back, through the
-- primary key (stream, version): the index of times that served the
-- events recorded since a time is no longer read, and its upkeep is
-- spared on every append.
DROP INDEX events_stream_recorded_at;

-- +goose Down
CREATE INDEX events_stream_recorded_at ON events (stream_id, recorded_at);
