-- +goose Up

-- event_log_clock ties the log's order to the cluster it runs on. An
-- event's transaction_id is the id of the transaction that appended it
-- plus xid_shift (the column's default says so), and readers take the
-- events below the oldest transaction in flight plus xid_shift. A logical
-- copy of the database (pg_dump and pg_restore, logical replication) into
-- another cluster keeps the events' ids but not the cluster's count of
-- transactions, which may run far below them: the app then raises
-- xid_shift, and the default with it, so that new events come after the
-- copied ones, and changes no event and no offset. system_identifier is
-- that of the cluster (pg_control_system) where the clock was last set,
-- NULL until the app first starts; moved_at is when it last moved.
CREATE TABLE event_log_clock (
    one               boolean     PRIMARY KEY DEFAULT true CHECK (one),
    xid_shift         bigint      NOT NULL DEFAULT 0 CHECK (xid_shift >= 0),
    system_identifier bigint,
    moved_at          timestamptz
);

INSERT INTO event_log_clock DEFAULT VALUES;

-- high_position is the highest position among the events an offset has
-- passed. An event above it that sorts below the offset was added after
-- the offset passed its place, which a sound log never does: such an
-- event is counted as still to apply, and said to be passed over, so a
-- broken order never hides as "behind by 0". events_position serves that
-- count, and the check of the position's sequence after a copy.
ALTER TABLE projection_offsets ADD COLUMN high_position bigint NOT NULL DEFAULT 0;

CREATE INDEX events_position ON events (position);

-- An offset has passed the events that sort at or below it. On a copy
-- from another cluster that a release without the clock has run on, new
-- events sort among the copied ones, and were never applied: only the
-- copied events, those beyond this cluster's ids, count as passed then,
-- so that the new ones show as passed over (and the projection as stuck)
-- instead of applied.
UPDATE projection_offsets AS o SET high_position = coalesce((
    SELECT max(e.position) FROM events AS e
    WHERE (e.transaction_id, e.position) <= (o.last_transaction_id, o.last_position)
    AND (e.transaction_id >= pg_snapshot_xmax(pg_current_snapshot())
        OR NOT EXISTS (SELECT 1 FROM events WHERE transaction_id >= pg_snapshot_xmax(pg_current_snapshot())))), 0);

-- +goose Down
ALTER TABLE events ALTER COLUMN transaction_id SET DEFAULT pg_current_xact_id();
DROP INDEX events_position;
ALTER TABLE projection_offsets DROP COLUMN high_position;
DROP TABLE event_log_clock;
