-- +goose Up

-- A subject has a data key per unit of work that sealed for it, named
-- within the subject by id, the key's fingerprint, with which every value
-- it sealed begins: a seal then inserts a key and reads none, and seals
-- for one subject at once never contend. expires_at is when a key that is
-- needed only for a while may go (NULL: until the subject is forgotten);
-- the sweep forgets a subject once all its keys have expired, which
-- erases an address that asked for no link for longer than a link matters
-- (internal/user). No release wrote data keys before this migration (the
-- keyring served only app keys rotate, which writes none), so the table is
-- made anew.
DROP TABLE data_keys;
CREATE TABLE data_keys (
    subject    text        COLLATE "C" NOT NULL,
    id         text        NOT NULL,
    master_id  text        NOT NULL,
    wrapped    bytea       NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    PRIMARY KEY (subject, id)
);

-- Only the primary key is indexed, so that a seal writes one index: the
-- sweep finds the subjects it forgets by the prefix of their names, in the
-- primary key's order, which is byte order (COLLATE "C"); a rotation,
-- which an operator runs now and then, scans the table.

-- +goose Down
-- Going back deletes every data key: every sealed address in the log then
-- reads as erased, and a rebuild of the views loses every account. Take a
-- copy of data_keys first if there is any chance of coming forward again.
DROP TABLE data_keys;
CREATE TABLE data_keys (
    subject    text    PRIMARY KEY,
    master_id  text    NOT NULL,
    wrapped    bytea   NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX data_keys_master_id ON data_keys (master_id);
