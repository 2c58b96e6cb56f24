-- +goose Up

-- activity_v1 is version 1 of the asynchronous projection "activity": what
-- happened to each account, kept from the events by the projection runner
-- in the same transaction as its offset. position_commit and position_seq
-- are the event's place in the log (transaction id and position), which
-- orders a page newest first and cuts the next.
CREATE TABLE activity_v1 (
    user_id         uuid        NOT NULL,
    position_commit bigint      NOT NULL,
    position_seq    bigint      NOT NULL,
    type            text        NOT NULL,
    at              timestamptz NOT NULL,
    detail          text        NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, position_commit, position_seq)
);

-- +goose Down
DROP TABLE activity_v1;
