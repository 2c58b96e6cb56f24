-- +goose Up

-- The sweep (user.Views.Sweep) deletes the rows of the user views whose
-- link or session has expired, every SWEEP_INTERVAL; these indexes find
-- them without reading the live ones. Before, each new link or session
-- deleted its own address's or user's expired rows, which read every live
-- row of a user with many sessions. The indexes on user_id and email
-- stay, to find the rows of one account or address.
CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE INDEX signin_codes_expires_at ON signin_codes (expires_at);
CREATE INDEX email_change_codes_expires_at ON email_change_codes (expires_at);

-- +goose Down
DROP INDEX email_change_codes_expires_at;
DROP INDEX signin_codes_expires_at;
DROP INDEX sessions_expires_at;
