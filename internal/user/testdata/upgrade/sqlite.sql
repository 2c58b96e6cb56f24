PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE goose_db_version (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		version_id INTEGER NOT NULL,
		is_applied INTEGER NOT NULL,
		tstamp TIMESTAMP DEFAULT (datetime('now'))
	);
INSERT INTO goose_db_version VALUES(1,0,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(2,1,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(3,2,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(4,3,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(5,4,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(6,5,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(7,6,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(8,7,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(9,8,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(10,9,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(11,10,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(12,11,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(13,12,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(14,13,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(15,14,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(16,16,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(17,18,1,'2026-12-06 20:27:19');
INSERT INTO goose_db_version VALUES(18,19,1,'2026-12-06 20:27:19');
CREATE TABLE events (
    position    INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT    NOT NULL UNIQUE,
    stream      TEXT    NOT NULL,
    version     INTEGER NOT NULL CHECK (version > 0),
    type        TEXT    NOT NULL,
    data        TEXT    NOT NULL CHECK (json_valid(data)),
    metadata    TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    recorded_at INTEGER NOT NULL,
    UNIQUE (stream, version)
) STRICT;
INSERT INTO events VALUES(1,'01a24d0a-2080-7407-9234-020e4e1656c3','signin-142fcba4e22252960c808bf8d3a573e7',1,'signin.link_requested','{"email":"enc:v1:9oI0MX49A7DC3mNDBaBYQbX5FbyIv3HYLcDOAyyFYy_hROKCwer8desgTobSzfWQeIcj","code_hash":"d9c8ac080fd973c743c7d27139a642c5ebd48ca4fbc6395a4ec0aa8d4bca0450","expires_at":"2026-12-06T11:55:00Z"}','{}',1796557200000000);
INSERT INTO events VALUES(2,'01a24d0a-2084-7096-9773-06a40f9b3e64','signin-142fcba4e22252960c808bf8d3a573e7',2,'signin.link_used','{"code_hash":"d9c8ac080fd973c743c7d27139a642c5ebd48ca4fbc6395a4ec0aa8d4bca0450","user_id":"01a24d0a-2083-7ed4-b273-d2508c303b5b"}','{}',1796557200000000);
INSERT INTO events VALUES(3,'01a24d0a-2084-7041-b770-cdc944714925','user-01a24d0a-2083-7ed4-b273-d2508c303b5b',1,'user.registered','{"user_id":"01a24d0a-2083-7ed4-b273-d2508c303b5b","email":"enc:v1:IYfLqB_rFRuqE75Oa-Kk-cMAERyuvFh05OuXZh4vjBU652GhSHSxBz1dFUbe9lo1-JVW"}','{}',1796557200000000);
INSERT INTO events VALUES(4,'01a24d0a-2084-72f2-b1b7-2cc3c071b11a','user-01a24d0a-2083-7ed4-b273-d2508c303b5b',2,'user.session_started','{"user_id":"01a24d0a-2083-7ed4-b273-d2508c303b5b","token_hash":"b77f51399ece159fb30702096abe650f453eda56860a588bd44cdd8e393186ed","expires_at":"2027-01-05T11:40:00Z","client":"Firefox on Linux"}','{}',1796557200000000);
INSERT INTO events VALUES(5,'01a24d0a-2087-70c7-a532-a1c1cdf88ba8','signin-15a6cdd2b1292b8f156466c9973e68da',1,'signin.link_requested','{"email":"enc:v1:8ZF33FNypZl94kk_1tr62J3T2P2jrgEd7tZ-epDTzFZ0JRwuz7q0-CyA06_1LYIdpGjiZg","code_hash":"67bcae61dbb0f0e9c51963d53958a4a078da9efd679f7f597911e709653a65b6","expires_at":"2026-12-06T12:03:00Z"}','{}',1796557680000000);
INSERT INTO events VALUES(6,'01a24d0a-2089-733b-9a5c-11bac68ef2d6','signin-15a6cdd2b1292b8f156466c9973e68da',2,'signin.link_requested','{"email":"enc:v1:Wt6bpEXfHmSsh5uoNHgvkbfvrp_eUo8NRUH1xSV50Nq0ekMFzbe6dQJmu4ScL78IxNwrUA","code_hash":"ea3065c47fdf46e2472c0d6c5f7ead74c269fc4176e115039eb64fb7d3d29284","expires_at":"2026-12-06T12:05:00Z"}','{}',1796557800000000);
INSERT INTO events VALUES(7,'01a24d0a-2089-7e81-829e-cdacebc821ec','signin-15a6cdd2b1292b8f156466c9973e68da',3,'signin.link_requested','{"email":"enc:v1:1XipbBXh9mp0gw29MTIp20uU8_mr0gHk3JOfzsrFZiP58qdocFViEyJl2C2m9iXSuPUAag","code_hash":"239127711c051fc08b8f785315524d884c84d096b03e4d086f43311d380741fa","expires_at":"2026-12-06T12:07:00Z"}','{}',1796557920000000);
INSERT INTO events VALUES(8,'01a24d0a-208a-79aa-ab96-989b9ee94515','signin-15a6cdd2b1292b8f156466c9973e68da',4,'signin.link_requested','{"email":"enc:v1:-ilC-B6plue9Ap3zqQUD2FPiEnZRUAyLkCKsQYN5kcZu9XAH0Tw6oXhV-vHML9Ao-ajJJw","code_hash":"698a62a3b6b8d58085e6686b6eae5f9f896f919336cb00186d51c12bde074bd8","expires_at":"2026-12-06T12:09:00Z"}','{}',1796558040000000);
INSERT INTO events VALUES(9,'01a24d0a-208b-74c7-a0b8-25b541039df5','signin-15a6cdd2b1292b8f156466c9973e68da',5,'signin.link_requested','{"email":"enc:v1:YTCx64pxEhPQ-CoFdf9QvsNcAIyhkYLYxu8VsTo0UBMIMBJs3NTsZa9zvcRE1OkzGvzw5Q","code_hash":"9edaee8f0fb2f8eb5d5f000be14740e99f710f414e5db94e446611a75e1700f4","expires_at":"2026-12-06T12:11:00Z"}','{}',1796558160000000);
INSERT INTO events VALUES(10,'01a24d0a-208c-720f-9386-15ed7ebe2ef3','user-01a24d0a-2083-7ed4-b273-d2508c303b5b',3,'user.email_change_requested','{"user_id":"01a24d0a-2083-7ed4-b273-d2508c303b5b","new_email":"enc:v1:dZnMzs6dLci9wEjwAv60Hg9J4iRTMSdBT4b_im9ZeMSZFad0qogYoblGVDab2XQLYOf-KzCnLQ","code_hash":"f08c31d0371a9b92d6a689781e0418ee39cafbf9ac1b3736e79466f312ffd497","expires_at":"2026-12-06T12:12:00Z"}','{}',1796558220000000);
INSERT INTO events VALUES(11,'01a24d0a-208c-7c9a-a6f6-03d57974906f','signin-51e67e64c8f45df16b3aa8364eb98c43',1,'signin.link_requested','{"email":"enc:v1:lznjPCXd46cmJRWLRuZYtsZlXBaYibTEFlRpkEoUA8A0mLLrBBJSx-fhMu8K7kK61tED","code_hash":"59db6196211ec5348d6b774c9fc50a6602d6290c9e6c708c2cc94f5d34cc42dd","expires_at":"2026-12-06T12:14:00Z"}','{}',1796558340000000);
CREATE TABLE outbox_messages (
    id         TEXT    PRIMARY KEY,
    topic      TEXT    NOT NULL,
    payload    TEXT    NOT NULL CHECK (json_valid(payload)),
    created_at INTEGER NOT NULL,
    due_at     INTEGER NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    buried_at  INTEGER
, ordering_key TEXT, seq INTEGER, origin TEXT CHECK (origin IS NULL OR json_valid(origin))) STRICT, WITHOUT ROWID;
CREATE TABLE users (
    id         TEXT    PRIMARY KEY,
    email      TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO users VALUES('01a24d0a-2083-7ed4-b273-d2508c303b5b','ada@example.com',1796557200000000);
CREATE TABLE signin_codes (
    code_hash  TEXT    PRIMARY KEY,
    email      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO signin_codes VALUES('239127711c051fc08b8f785315524d884c84d096b03e4d086f43311d380741fa','dave@example.com',1796558820000000);
INSERT INTO signin_codes VALUES('59db6196211ec5348d6b774c9fc50a6602d6290c9e6c708c2cc94f5d34cc42dd','bob@example.com',1796559240000000);
INSERT INTO signin_codes VALUES('67bcae61dbb0f0e9c51963d53958a4a078da9efd679f7f597911e709653a65b6','dave@example.com',1796558580000000);
INSERT INTO signin_codes VALUES('698a62a3b6b8d58085e6686b6eae5f9f896f919336cb00186d51c12bde074bd8','dave@example.com',1796558940000000);
INSERT INTO signin_codes VALUES('9edaee8f0fb2f8eb5d5f000be14740e99f710f414e5db94e446611a75e1700f4','dave@example.com',1796559060000000);
INSERT INTO signin_codes VALUES('ea3065c47fdf46e2472c0d6c5f7ead74c269fc4176e115039eb64fb7d3d29284','dave@example.com',1796558700000000);
CREATE TABLE email_change_codes (
    code_hash  TEXT    PRIMARY KEY,
    user_id    TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO email_change_codes VALUES('f08c31d0371a9b92d6a689781e0418ee39cafbf9ac1b3736e79466f312ffd497','01a24d0a-2083-7ed4-b273-d2508c303b5b',1796559120000000);
CREATE TABLE projection_offsets (
    consumer_group TEXT    PRIMARY KEY,
    last_position  INTEGER NOT NULL CHECK (last_position >= 0)
, failed_at INTEGER, failed_position TEXT, failed_error TEXT, retired_at INTEGER) STRICT, WITHOUT ROWID;
CREATE TABLE activity_v1 (
    user_id  TEXT    NOT NULL,
    position INTEGER NOT NULL,
    type     TEXT    NOT NULL,
    at       INTEGER NOT NULL,
    detail   TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, position)
) STRICT, WITHOUT ROWID;
CREATE TABLE projection_versions (
    name     TEXT    PRIMARY KEY,
    serving  INTEGER NOT NULL CHECK (serving > 0),
    building INTEGER CHECK (building > serving)
) STRICT;
CREATE TABLE outbox_sequence (last INTEGER NOT NULL) STRICT;
INSERT INTO outbox_sequence VALUES(0);
CREATE TABLE data_keys (
    subject    TEXT        NOT NULL,
    id         TEXT        NOT NULL,
    master_id  TEXT        NOT NULL,
    wrapped    BLOB        NOT NULL,
    created_at INTEGER     NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (subject, id)
);
INSERT INTO data_keys VALUES('$signin-stream-names','secret','upgrade',X'19d3ac4ee318e3d70a6bb564c1a12c888806f766cb477384b39ba6bf4e0d1ed76712164edcfbcedbeb88da24e375a38ae249b8f7a1b940958d6754a2ecb5b8cb108c4f5b5d893a15',1796557200000000,NULL);
INSERT INTO data_keys VALUES('signin-142fcba4e22252960c808bf8d3a573e7','f68234317e3d03b0','upgrade',X'6a31148a3d8abc4de8ecfc34b6e8f520fcd8457dbe13ae4cb898ea2671af8ea97fdc2fda1c33031202f2f68a30c9653ebe87418c592e6261027944c88134035eccd9376de9abca26',1796557200000000,1796558100000000);
INSERT INTO data_keys VALUES('user-01a24d0a-2083-7ed4-b273-d2508c303b5b','2187cba81feb151b','upgrade',X'853071d6860eef525075afabaf99ceda60847af2d56af83d7dbaf0056f08670b9e130d2fdd7b72561436bbeebfdf69e1e4faec1101739c283d0414973af8ed0765d461fd184c6e52',1796557200000000,NULL);
INSERT INTO data_keys VALUES('signin-15a6cdd2b1292b8f156466c9973e68da','f19177dc5372a599','upgrade',X'cb09aaa347d0d2cfc01a60ee0f9d8c7efb8d9534fb959ad58672b87dc678e3c911c67139f879439fcc5d7b8ddebf73947cab85df0163d6025fd58537b57b8fab8ecc1e1e591ed9cd',1796557680000000,1796558580000000);
INSERT INTO data_keys VALUES('signin-15a6cdd2b1292b8f156466c9973e68da','5ade9ba445df1e64','upgrade',X'740f4d9fbd3b3f4db3ece8c7cc63fd1508297be705ec4745bbbc9fbaadab521d84a82544e72aebc5723aae0ea6d45a1306ad3be2f0bd2fb5cab3e51793732c07fd4366acf8a31e4d',1796557800000000,1796558700000000);
INSERT INTO data_keys VALUES('signin-15a6cdd2b1292b8f156466c9973e68da','d578a96c15e1f66a','upgrade',X'7bc432ecc9a2ce101567ac66f1621e6e41d6ed402aff7f400c4ab3c95a49e3d9428bb82c27909199aea95f224753fbf0cc78d49e8bd48c73ca7e65fffcc518fca7dc339ef8756567',1796557920000000,1796558820000000);
INSERT INTO data_keys VALUES('signin-15a6cdd2b1292b8f156466c9973e68da','fa2942f81ea996e7','upgrade',X'00d0f5db98d075359a0580ff7ea102f4b1e07fa0b195a39d8aa757c2a9307c82cff7253890cbd54e10f1777a3f129259f73b2add8850f1edd22c4f99bc73e86bd7fcd27c8a38db52',1796558040000000,1796558940000000);
INSERT INTO data_keys VALUES('signin-15a6cdd2b1292b8f156466c9973e68da','6130b1eb8a711213','upgrade',X'8a80a1883355bd44eafd0f233df37643275bd2054935012ff40b464f3547c4aa74e1030e1ec2cc54432add0d0e76f5e61bc996cb00b44c146abd9624bc01ba6a84e8a5eb02386184',1796558160000000,1796559060000000);
INSERT INTO data_keys VALUES('change-f08c31d0371a9b92d6a689781e0418ee39cafbf9ac1b3736e79466f312ffd497','7599cccece9d2dc8','upgrade',X'c32e405e2cc6d7e6e1d6113c746d7c1bb992f1735e63868396ad7bf6b007e952e503d30138cb2a8ab92d33483081df37961375bfbc31eeffe4f9d00281ef12dfd50981f2cdcbe18a',1796558220000000,1796559120000000);
INSERT INTO data_keys VALUES('signin-51e67e64c8f45df16b3aa8364eb98c43','9739e33c25dde3a7','upgrade',X'9af5cbb3ea14e724cd3aaf565d6229e789bad5ca155fe4f50a24ddc3be057ac11e819d590add719cb93f1ac934345c9ba073ec30b48ba8a0ac8710ade3ccea976a8998153ed91d36',1796558340000000,1796559240000000);
CREATE TABLE mail_budgets (
    mailbox  TEXT    PRIMARY KEY,
    spends   TEXT    NOT NULL CHECK (json_valid(spends)),
    spent_at INTEGER NOT NULL
);
CREATE TABLE data_key_masters (
    master_id   TEXT  PRIMARY KEY,
    check_value BLOB
);
CREATE TABLE IF NOT EXISTS "sessions" (
    token_hash TEXT    PRIMARY KEY,
    user_id    TEXT    NOT NULL,
    id         TEXT    NOT NULL UNIQUE,
    started_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    client     TEXT    NOT NULL DEFAULT ''
) STRICT, WITHOUT ROWID;
INSERT INTO sessions VALUES('b77f51399ece159fb30702096abe650f453eda56860a588bd44cdd8e393186ed','01a24d0a-2083-7ed4-b273-d2508c303b5b','01a24d0a-2084-72f2-b1b7-2cc3c071b11a',1796557200000000,1799149200000000,'Firefox on Linux');
CREATE TABLE session_uses (
    token_hash TEXT    PRIMARY KEY,
    used_at    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO session_uses VALUES('b77f51399ece159fb30702096abe650f453eda56860a588bd44cdd8e393186ed',1796558400000000);
CREATE TABLE email_undo_codes (
    code_hash  TEXT    PRIMARY KEY,
    user_id    TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
DELETE FROM sqlite_sequence;
INSERT INTO sqlite_sequence VALUES('goose_db_version',18);
INSERT INTO sqlite_sequence VALUES('events',11);
CREATE INDEX outbox_messages_due ON outbox_messages (due_at, id) WHERE buried_at IS NULL;
CREATE INDEX outbox_messages_buried ON outbox_messages (buried_at) WHERE buried_at IS NOT NULL;
CREATE UNIQUE INDEX users_email_key ON users (email);
CREATE INDEX signin_codes_email ON signin_codes (email);
CREATE INDEX email_change_codes_user_id ON email_change_codes (user_id);
CREATE INDEX events_stream_recorded_at ON events (stream, recorded_at);
CREATE VIEW activity AS SELECT * FROM activity_v1;
CREATE INDEX outbox_messages_key ON outbox_messages (ordering_key, seq) WHERE ordering_key IS NOT NULL AND buried_at IS NULL;
CREATE INDEX signin_codes_expires_at ON signin_codes (expires_at);
CREATE INDEX email_change_codes_expires_at ON email_change_codes (expires_at);
CREATE INDEX mail_budgets_spent_at ON mail_budgets (spent_at);
CREATE INDEX sessions_user_id ON sessions (user_id);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE INDEX email_undo_codes_user_id ON email_undo_codes (user_id);
CREATE INDEX email_undo_codes_expires_at ON email_undo_codes (expires_at);
COMMIT;
