-- +goose Up

-- projection_versions is the registry of the asynchronous projections that
-- are rebuilt blue/green: the version whose tables reads see, and the one
-- being built beside it from the start of the log. A projection missing
-- here serves its first version. `app projections rebuild` writes it; every
-- instance's projection runner follows it.
CREATE TABLE projection_versions (
    name     TEXT    PRIMARY KEY,
    serving  INTEGER NOT NULL CHECK (serving > 0),
    building INTEGER CHECK (building > serving)
) STRICT;

-- activity is what reads of the activity projection query: a view of the
-- version that serves, which a rebuild replaces in the transaction that
-- switches to the new version.
CREATE VIEW activity AS SELECT * FROM activity_v1;

-- +goose Down
DROP VIEW activity;
DROP TABLE projection_versions;
