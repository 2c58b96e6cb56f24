-- +goose Up

-- data_keys holds the data key of each subject whose personal data is
-- sealed (internal/keyring): a person, or an address that asked for a
-- link. The key is wrapped by the master key master_id of DATA_KEY.
-- Deleting a row erases every value sealed under its key, in events and
-- in every copy of them.
CREATE TABLE data_keys (
    subject    text    PRIMARY KEY,
    master_id  text    NOT NULL,
    wrapped    bytea   NOT NULL,
    created_at timestamptz NOT NULL
);

-- data_keys_master_id finds the keys that a rotation rewraps.
CREATE INDEX data_keys_master_id ON data_keys (master_id);

-- +goose Down
DROP TABLE data_keys;
