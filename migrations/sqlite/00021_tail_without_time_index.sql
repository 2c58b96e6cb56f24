-- +goose Up

-- A stream's recent stretch is found from its head back, through the
-- unique index on (stream, version): the index of times that served the
-- events recorded since a time is no longer read.
DROP INDEX events_stream_recorded_at;

-- +goose Down
CREATE INDEX events_stream_recorded_at ON events (stream, recorded_at);
