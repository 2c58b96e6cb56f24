package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// MailBudgets is the store of the mail budgets of mailboxes on SQLite
// ([mail.BudgetStore]), in the table mail_budgets: a row per mailbox,
// named by a keyed hash, with its spends as a JSON array. It works in
// the transaction of the unit of work it is given.
type MailBudgets struct{}

var _ mail.BudgetStore = MailBudgets{}

// MailBudgets returns the store of the mail budgets ([MailBudgets]).
func (db *DB) MailBudgets() mail.BudgetStore { return MailBudgets{} }

// HoldBudget returns the spends of mailbox, as [mail.BudgetStore]
// describes. A unit of work of [Runner.Do] is the database's one writer
// from its BEGIN IMMEDIATE to its end, so what it reads stays as it read
// it, and another waits its turn; a read-only one, which holds nothing,
// is refused.
func (MailBudgets) HoldBudget(ctx context.Context, t uow.Tx, mailbox string) ([]mail.Spend, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("mail budgets: %w", err)
	}
	if err := st.writing(); err != nil {
		return nil, fmt.Errorf("mail budgets: hold: %w", err)
	}
	var raw string
	err = st.QueryRowContext(ctx, `SELECT spends FROM mail_budgets WHERE mailbox = ?`, mailbox).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mail budgets: hold: %w", err)
	}
	var spends []mail.Spend
	if err := json.Unmarshal([]byte(raw), &spends); err != nil {
		return nil, fmt.Errorf("mail budgets: hold: %w", err)
	}
	for i := range spends {
		spends[i].At = spends[i].At.UTC()
	}
	return spends, nil
}

// KeepBudget replaces the spends of mailbox, as [mail.BudgetStore]
// describes.
func (MailBudgets) KeepBudget(ctx context.Context, t uow.Tx, mailbox string, spends []mail.Spend) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("mail budgets: %w", err)
	}
	if len(spends) == 0 {
		if _, err := st.ExecContext(ctx, `DELETE FROM mail_budgets WHERE mailbox = ?`, mailbox); err != nil {
			return fmt.Errorf("mail budgets: keep: %w", err)
		}
		return nil
	}
	var last time.Time
	utc := make([]mail.Spend, len(spends))
	for i, s := range spends {
		utc[i] = mail.Spend{MessageID: s.MessageID, At: s.At.UTC()}
		if s.At.After(last) {
			last = s.At
		}
	}
	raw, err := json.Marshal(utc)
	if err != nil {
		return fmt.Errorf("mail budgets: keep: %w", err)
	}
	if _, err := st.ExecContext(ctx, `INSERT INTO mail_budgets (mailbox, spends, spent_at) VALUES (?, ?, ?)
ON CONFLICT (mailbox) DO UPDATE SET spends = excluded.spends, spent_at = excluded.spent_at`,
		mailbox, string(raw), micros(last)); err != nil {
		return fmt.Errorf("mail budgets: keep: %w", err)
	}
	return nil
}

// SweepBudgets deletes up to limit mailboxes spent at or before before, as
// [mail.BudgetStore] describes.
func (MailBudgets) SweepBudgets(ctx context.Context, t uow.Tx, before time.Time, limit int) (int64, error) {
	st, err := asTx(t)
	if err != nil {
		return 0, fmt.Errorf("mail budgets: %w", err)
	}
	res, err := st.ExecContext(ctx, `DELETE FROM mail_budgets WHERE mailbox IN
    (SELECT mailbox FROM mail_budgets WHERE spent_at <= ? LIMIT ?)`, micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("mail budgets: sweep: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("mail budgets: sweep: %w", err)
	}
	return n, nil
}
