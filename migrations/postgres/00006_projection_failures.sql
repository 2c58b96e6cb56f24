-- +goose Up

-- A projection that cannot apply an event stops and records here which
-- event and why, so that `app projections status` tells it from any
-- instance; applying an event clears it.
ALTER TABLE projection_offsets
    ADD COLUMN failed_at       timestamptz,
    ADD COLUMN failed_position text,
    ADD COLUMN failed_error    text;

-- +goose Down
ALTER TABLE projection_offsets
    DROP COLUMN failed_at,
    DROP COLUMN failed_position,
    DROP COLUMN failed_error;
