-- +goose Up

-- Streams are named once, in event_streams, and events refer to their
-- stream by its id: a bigint in the row and in the primary key (still the
-- optimistic concurrency guard) instead of a name of some 40 bytes. A stream's
-- name sorts in byte order (COLLATE "C"); two names are equal exactly
-- when they were before. The metadata's correlation and causation get
-- columns of their own, and metadata keeps the rest of it (Extra). No
-- column of events may be NULL: one NULL adds a bitmap that pads the
-- row's header from 24 bytes to 32. The fixed-width columns go first,
-- those of 8 bytes before the smallint, and the variable-width ones last,
-- so that no padding comes between them. On half a million events of
-- the history of `app bench growth`, the events, their indexes and their
-- streams take 398 bytes an event, against 569 before.
--
-- events_position becomes a BRIN index, which keeps the lowest and the
-- highest position of each 32 pages: positions grow in the order rows
-- are added, so a range of positions is a few ranges of pages, and the
-- index takes next to nothing. VACUUM summarizes the ranges of pages
-- added since it last ran; until then a read by position (the count of a
-- projection's passed-over events, Log.Behind) reads those pages whole.
-- So autovacuum vacuums events after every 10,000 events added, rather
-- than after a fifth of the table as it would by default: a vacuum of
-- pages only ever inserted into reads those pages and little else. The
-- index does not ask autovacuum to summarize each range as it fills
-- (autosummarize): those requests wait in a queue of 256 for the whole
-- server, which only autovacuum empties, and where it is off each request
-- beyond it writes a line to PostgreSQL's log. Where autovacuum is off,
-- run VACUUM on events every few minutes, or those reads grow with the
-- events appended since the last one.
--
-- No foreign key ties events.stream_id to event_streams. It cost an
-- append statement 6% (9,200 against 8,700 a second on one connection
-- of the test server) and took a lock on the stream's row at every
-- append, which writes that row's page and the WAL. The event store is
-- the one writer of stream_id, and takes it from event_streams in the
-- statement or unit of work that inserts the event; nothing deletes a
-- stream. Reads of events join their streams so that an event whose
-- stream's row went (by hand) fails the read, rather than being passed
-- over.
--
-- The migration writes the whole table anew, in a copy that keeps every
-- event's position, transaction id, id, version, time, schema version,
-- type and data, the default of transaction_id that the log's clock set,
-- and the sequence of positions where it was; then it builds the
-- indexes. It holds the events table's exclusive lock throughout: no
-- append and no read of the log runs meanwhile, and an instance of the
-- release before cannot run against the new layout (stop those before
-- migrating). It took 4.3 s for a million events (550 MB of table and
-- indexes) on a server of two cores that held the table in memory;
-- reading from disk takes longer. It needs the table's size again on
-- disk while it runs. Privileges granted on events by hand do not carry
-- over: grant them again, on events and on event_streams.
CREATE TABLE event_streams (
    id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text   COLLATE "C" NOT NULL UNIQUE
);

INSERT INTO event_streams (name)
SELECT stream FROM events GROUP BY stream ORDER BY min(position);

CREATE TABLE events_new (
    position       bigint      GENERATED ALWAYS AS IDENTITY,
    transaction_id xid8        NOT NULL,
    id             uuid        NOT NULL,
    stream_id      bigint      NOT NULL,
    version        bigint      NOT NULL CONSTRAINT events_version_check CHECK (version > 0),
    recorded_at    timestamptz NOT NULL,
    schema_version smallint    NOT NULL DEFAULT 1 CONSTRAINT events_schema_version_check CHECK (schema_version > 0),
    type           text        NOT NULL,
    data           jsonb       NOT NULL,
    correlation_id text        NOT NULL DEFAULT '',
    causation_id   text        NOT NULL DEFAULT '',
    metadata       jsonb       NOT NULL DEFAULT '{}'
);

-- The log's clock sets the default of transaction_id (00014): the new
-- column takes the old one's as it is.
-- +goose StatementBegin
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO STRICT def
    FROM pg_attrdef AS d
    JOIN pg_attribute AS a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
    WHERE d.adrelid = 'events'::regclass AND a.attname = 'transaction_id';
    EXECUTE 'ALTER TABLE events_new ALTER COLUMN transaction_id SET DEFAULT ' || def;
END
$$;
-- +goose StatementEnd

INSERT INTO events_new (position, transaction_id, id, stream_id, version, recorded_at, schema_version,
    type, data, correlation_id, causation_id, metadata)
OVERRIDING SYSTEM VALUE
SELECT e.position, e.transaction_id, e.id, s.id, e.version, e.recorded_at, e.schema_version,
    e.type, e.data, coalesce(e.metadata->>'correlation_id', ''), coalesce(e.metadata->>'causation_id', ''),
    e.metadata - 'correlation_id' - 'causation_id'
FROM events AS e JOIN event_streams AS s ON s.name = e.stream
ORDER BY e.position;

-- The next position follows the last one handed out, whether or not its
-- event is still there.
SELECT setval(pg_get_serial_sequence('events_new', 'position'), greatest(
    pg_sequence_last_value(pg_get_serial_sequence('events', 'position')::regclass),
    (SELECT max(position) FROM events_new)));

DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
ALTER SEQUENCE events_new_position_seq RENAME TO events_position_seq;

-- The primary key is the optimistic concurrency guard: two appends at one
-- version of a stream cannot both commit.
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (stream_id, version);
ALTER TABLE events ADD CONSTRAINT events_id_key UNIQUE (id);
CREATE INDEX events_log ON events (transaction_id, position);
-- No index of a stream's events by time: a stream's recent stretch is
-- found from its head back, through the primary key.
CREATE INDEX events_position ON events USING brin (position) WITH (pages_per_range = 32);
ALTER TABLE events SET (autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_insert_scale_factor = 0);

-- Statistics for the planner, unless there are no events: an empty table
-- analyzed counts as known to be empty, and a new database's connections
-- would keep plans made for that, which read the tables whole once they
-- have grown.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT FROM events) THEN
        ANALYZE events, event_streams;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The table is written anew in its layout before, with the stream's name
-- in each row and the metadata whole.
CREATE TABLE events_old (
    position       bigint      GENERATED ALWAYS AS IDENTITY,
    transaction_id xid8        NOT NULL,
    id             uuid        NOT NULL,
    stream         text        NOT NULL,
    version        bigint      NOT NULL CONSTRAINT events_version_check CHECK (version > 0),
    type           text        NOT NULL,
    data           jsonb       NOT NULL,
    metadata       jsonb       NOT NULL DEFAULT '{}',
    recorded_at    timestamptz NOT NULL,
    schema_version smallint    NOT NULL DEFAULT 1 CONSTRAINT events_schema_version_check CHECK (schema_version > 0)
);
-- +goose StatementBegin
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO STRICT def
    FROM pg_attrdef AS d
    JOIN pg_attribute AS a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
    WHERE d.adrelid = 'events'::regclass AND a.attname = 'transaction_id';
    EXECUTE 'ALTER TABLE events_old ALTER COLUMN transaction_id SET DEFAULT ' || def;
END
$$;
-- +goose StatementEnd
INSERT INTO events_old (position, transaction_id, id, stream, version, type, data, metadata, recorded_at, schema_version)
OVERRIDING SYSTEM VALUE
SELECT e.position, e.transaction_id, e.id, s.name, e.version, e.type, e.data,
    e.metadata || jsonb_strip_nulls(jsonb_build_object(
        'correlation_id', nullif(e.correlation_id, ''), 'causation_id', nullif(e.causation_id, ''))),
    e.recorded_at, e.schema_version
FROM events AS e JOIN event_streams AS s ON s.id = e.stream_id
ORDER BY e.position;
SELECT setval(pg_get_serial_sequence('events_old', 'position'), greatest(
    pg_sequence_last_value(pg_get_serial_sequence('events', 'position')::regclass),
    (SELECT max(position) FROM events_old)));
DROP TABLE events;
DROP TABLE event_streams;
ALTER TABLE events_old RENAME TO events;
ALTER SEQUENCE events_old_position_seq RENAME TO events_position_seq;
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (stream, version);
ALTER TABLE events ADD CONSTRAINT events_id_key UNIQUE (id);
CREATE INDEX events_log ON events (transaction_id, position);
CREATE INDEX events_stream_recorded_at ON events (stream, recorded_at);
CREATE INDEX events_position ON events (position);
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT FROM events) THEN
        ANALYZE events;
    END IF;
END
$$;
-- +goose StatementEnd
