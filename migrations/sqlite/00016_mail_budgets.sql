-- +goose Up

-- mail_budgets holds what each mailbox has spent of its mail budget
-- (internal/user/mail, MAIL_BUDGET mails per MAIL_BUDGET_WINDOW): the
-- outbox messages it was sent within the window and when, as a JSON
-- array of {"id","at"}. A mailbox is named by a keyed hash of it, never
-- by an address. spent_at is its latest spend, in microseconds since
-- 1970, by which the sweep deletes the budgets of mailboxes sent nothing
-- for a window.
CREATE TABLE mail_budgets (
    mailbox  TEXT    PRIMARY KEY,
    spends   TEXT    NOT NULL CHECK (json_valid(spends)),
    spent_at INTEGER NOT NULL
);

-- mail_budgets_spent_at finds the budgets that the sweep deletes.
CREATE INDEX mail_budgets_spent_at ON mail_budgets (spent_at);

-- +goose Down
DROP TABLE mail_budgets;
