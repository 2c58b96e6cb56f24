-- +goose Up

-- data_key_masters records each master key of DATA_KEY that wraps keys of
-- data_keys, with a check value that key sealed (internal/keyring,
-- Keyring.Check): an instance started without one of them, or with
-- another key under a recorded ID, stops at its start, naming the keys,
-- rather than failing at each seal. The rows made here are the master keys
-- of the keys already there, without a check; the first start that has
-- the key fills it in.
CREATE TABLE data_key_masters (
    master_id   text  PRIMARY KEY,
    check_value bytea
);
INSERT INTO data_key_masters (master_id) SELECT DISTINCT master_id FROM data_keys;

-- +goose Down
DROP TABLE data_key_masters;
