package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// MailBudgets is the store of the mail budgets of mailboxes on PostgreSQL
// ([mail.BudgetStore]), in the table mail_budgets: a row per mailbox,
// named by a keyed hash, with its spends as a JSON array. It works in
// the transaction of the unit of work it is given.
type MailBudgets struct{}

var _ mail.BudgetStore = MailBudgets{}

// MailBudgets returns the store of the mail budgets ([MailBudgets]).
func (db *DB) MailBudgets() mail.BudgetStore { return MailBudgets{} }

// HoldBudget returns the spends of mailbox, as [mail.BudgetStore]
// describes. Its upsert locks the mailbox's row, inserting an empty one
// for a mailbox that has none, and waits for a unit of work that holds
// it, or that inserts it, to end; then it returns the row as that one
// left it, which read committed lets the next statement see too.
func (MailBudgets) HoldBudget(ctx context.Context, t uow.Tx, mailbox string) ([]mail.Spend, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("mail budgets: %w", err)
	}
	var raw []byte
	err = ptx.QueryRow(ctx, `INSERT INTO mail_budgets (mailbox, spends, spent_at) VALUES ($1, '[]', '-infinity')
ON CONFLICT (mailbox) DO UPDATE SET mailbox = excluded.mailbox
RETURNING spends`, mailbox).Scan(&raw)
	if err != nil {
		return nil, fmt.Errorf("mail budgets: hold: %w", err)
	}
	var spends []mail.Spend
	if err := json.Unmarshal(raw, &spends); err != nil {
		return nil, fmt.Errorf("mail budgets: hold: %w", err)
	}
	for i := range spends {
		spends[i].At = spends[i].At.UTC()
	}
	return spends, nil
}

// KeepBudget replaces the spends of mailbox, as [mail.BudgetStore]
// describes. The write goes to the server with the unit of work's next
// statement or its commit, in no round trip of its own.
func (MailBudgets) KeepBudget(ctx context.Context, t uow.Tx, mailbox string, spends []mail.Spend) error {
	pt, err := asTx(t)
	if err != nil {
		return fmt.Errorf("mail budgets: %w", err)
	}
	wrap := func(err error) error { return fmt.Errorf("mail budgets: keep: %w", err) }
	if len(spends) == 0 {
		return pt.later(ctx, `DELETE FROM mail_budgets WHERE mailbox = $1`, []any{mailbox}, wrap)
	}
	raw, last, err := encodeSpends(spends)
	if err != nil {
		return wrap(err)
	}
	return pt.later(ctx, `INSERT INTO mail_budgets (mailbox, spends, spent_at) VALUES ($1, $2, $3)
ON CONFLICT (mailbox) DO UPDATE SET spends = excluded.spends, spent_at = excluded.spent_at`,
		[]any{mailbox, string(raw), last}, wrap)
}

// SweepBudgets deletes up to limit mailboxes spent at or before before, as
// [mail.BudgetStore] describes. The outer condition is checked again on
// a row that a spend updated meanwhile, which then stays.
func (MailBudgets) SweepBudgets(ctx context.Context, t uow.Tx, before time.Time, limit int) (int64, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return 0, fmt.Errorf("mail budgets: %w", err)
	}
	tag, err := ptx.Exec(ctx, `DELETE FROM mail_budgets WHERE spent_at <= $1 AND mailbox IN
    (SELECT mailbox FROM mail_budgets WHERE spent_at <= $1 LIMIT $2)`, before, limit)
	if err != nil {
		return 0, fmt.Errorf("mail budgets: sweep: %w", err)
	}
	return tag.RowsAffected(), nil
}

// encodeSpends returns spends as JSON, their times in UTC, and the time of
// the latest.
func encodeSpends(spends []mail.Spend) ([]byte, time.Time, error) {
	var last time.Time
	utc := make([]mail.Spend, len(spends))
	for i, s := range spends {
		utc[i] = mail.Spend{MessageID: s.MessageID, At: s.At.UTC()}
		if s.At.After(last) {
			last = s.At
		}
	}
	raw, err := json.Marshal(utc)
	return raw, last, err
}
