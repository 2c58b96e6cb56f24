-- +goose Up

-- schema_version is the version of an event's data under its type: a
-- new shape of a type is a new version, and readers upcast the older
-- ones. Every event stored before versions were kept is version 1.
ALTER TABLE events ADD COLUMN schema_version smallint NOT NULL DEFAULT 1 CHECK (schema_version > 0);

-- +goose Down
ALTER TABLE events DROP COLUMN schema_version;
