-- +goose Up

-- activity_v1 is version 1 of the asynchronous projection "activity": what
-- happened to each account, kept from the events by the projection runner
-- in the same transaction as its offset. position is the event's place in
-- the log, which orders a page newest first and cuts the next.
CREATE TABLE activity_v1 (
    user_id  TEXT    NOT NULL,
    position INTEGER NOT NULL,
    type     TEXT    NOT NULL,
    at       INTEGER NOT NULL,
    detail   TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, position)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE activity_v1;
