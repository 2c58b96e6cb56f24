-- +goose Up

-- Before addresses were sealed, a sign-in stream was named signin-ADDRESS
-- and its events held the address in plain text. Streams are named by a
-- keyed hash of the address now (signin- and 32 hex digits, never an @),
-- so nothing reads the old ones again: their links are dead, and their
-- requests count against no limit. They go, addresses and all. No
-- projection that follows the log reads sign-in events.
DELETE FROM events WHERE stream LIKE 'signin-%@%';

-- +goose Down
-- What went is gone; the streams named by a hash stay.
SELECT 1;
