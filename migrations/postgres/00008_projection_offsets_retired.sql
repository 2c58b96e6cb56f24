-- +goose Up

-- retired_at marks the offset of a projection version that a blue/green
-- rebuild has switched away from: its subscribers read nothing more, a
-- subscriber that comes late cannot start it again at the log's start, and
-- it counts as behind by nothing.
ALTER TABLE projection_offsets ADD COLUMN retired_at timestamptz;

-- +goose Down
ALTER TABLE projection_offsets DROP COLUMN retired_at;
