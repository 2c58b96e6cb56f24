-- +goose Up

-- A projection that cannot apply an event stops and records here which
-- event and why, so that `app projections status` tells it from any
-- instance; applying an event clears it.
ALTER TABLE projection_offsets ADD COLUMN failed_at INTEGER;
ALTER TABLE projection_offsets ADD COLUMN failed_position TEXT;
ALTER TABLE projection_offsets ADD COLUMN failed_error TEXT;

-- +goose Down
ALTER TABLE projection_offsets DROP COLUMN failed_at;
ALTER TABLE projection_offsets DROP COLUMN failed_position;
ALTER TABLE projection_offsets DROP COLUMN failed_error;
