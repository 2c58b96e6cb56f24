-- +goose Up

-- events_stream_recorded_at serves LoadSince: the events of one stream
-- recorded since a time (INTEGER microseconds), without reading the
-- stream's older events. The stream's head version still comes from
-- UNIQUE (stream, version).
CREATE INDEX events_stream_recorded_at ON events (stream, recorded_at);

-- +goose Down
DROP INDEX events_stream_recorded_at;
