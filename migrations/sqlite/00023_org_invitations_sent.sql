-- +goose Up

-- org_invitations_sent holds when each account sent an invitation, in any
-- organization, for the limit of invitations an account sends
-- (INVITATION_ACCOUNT_LIMIT per INVITATION_WINDOW), as on PostgreSQL. A
-- row outlives its invitation and its organization; the sweep deletes it
-- once it is older than the window. It holds no address.
CREATE TABLE org_invitations_sent (
    id         TEXT    PRIMARY KEY,
    invited_by TEXT    NOT NULL,
    sent_at    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX org_invitations_sent_by ON org_invitations_sent (invited_by, sent_at);
CREATE INDEX org_invitations_sent_at ON org_invitations_sent (sent_at);

-- +goose Down
DROP TABLE org_invitations_sent;
