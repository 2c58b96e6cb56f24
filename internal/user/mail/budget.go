package mail

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
)

// Spend is one mail that a mailbox's budget paid for: its outbox message,
// and when.
type Spend struct {
	MessageID uuid.UUID `json:"id"`
	At        time.Time `json:"at"`
}

// BudgetStore keeps what each mailbox has spent of its [Budget]: the
// spends of its last window, under a keyed hash of the mailbox, never its
// address. Each backend implements it, and runs its conformance suite,
// budgettest. Every method works in the unit of work it is given, and
// returns an error wrapping [uow.ErrForeignTx] for one of another
// backend's.
type BudgetStore interface {
	// HoldBudget returns the spends that KeepBudget last kept for
	// mailbox, none for a mailbox it never kept, and holds mailbox until
	// tx ends: a HoldBudget of the same mailbox in another unit of work
	// waits until then, so that the units of work that spend one budget
	// take turns. In a read-only unit of work it returns an error
	// wrapping [uow.ErrReadOnly].
	HoldBudget(ctx context.Context, tx uow.Tx, mailbox string) ([]Spend, error)
	// KeepBudget replaces the spends of mailbox with spends, as part of
	// tx; none deletes them.
	KeepBudget(ctx context.Context, tx uow.Tx, mailbox string, spends []Spend) error
	// SweepBudgets deletes up to limit mailboxes whose every spend was at
	// or before before, and returns how many it deleted. A mailbox that
	// a unit of work holds and spends meanwhile is not deleted.
	SweepBudgets(ctx context.Context, tx uow.Tx, before time.Time, limit int) (int64, error)
}

// BudgetConfig is the size of a [Budget]: at most Limit mails to one
// mailbox in any Window.
type BudgetConfig struct {
	Limit  int
	Window time.Duration
}

// budgetNamesSubject is the keyring subject whose secret names the
// mailboxes of the budgets ([keyring.Keyring.Secret]).
const budgetNamesSubject = "$mail-budget-names"

// budgetSweepMargin is how long after its window a budget is swept: an
// instance whose clock runs ahead of the others' must not sweep what they
// still count.
const budgetSweepMargin = 5 * time.Minute

// budgetSweepBatch bounds the budgets that one unit of work of a sweep
// deletes.
const budgetSweepBatch = 1000

// Budget caps the mail that one mailbox receives, whatever its spelling
// ([Mailbox]) and whoever set the mail off: at most Limit mails in any
// Window, counting every topic. It is spent where mail is delivered, by
// the handlers ([Config.Budget]), one unit per outbox message, once: a
// message delivered again (the relay's delivery is at least once) spends
// nothing more. A mail that finds the budget spent is held back: the
// handler acknowledges it without sending it, so it is never retried or
// buried, and the request that set it off was answered as if it were
// sent.
//
// Sign-in links are counted but never held back: anyone may ask for a
// link to any address, so a budget that held them back would let whoever
// spends a person's budget, with mail of other topics, keep that person
// from signing in. Their own limit, per mailbox too, caps them
// (LINK_LIMIT per LINK_WINDOW). A notice that tells a person of a change
// to their own account, which only the account's holder can set off, is
// to be counted and never held back too, lest whoever spent the budget
// hide the change.
//
// Spends of one mailbox take turns ([BudgetStore.HoldBudget]): two relays
// spending its last unit at once never both send.
type Budget struct {
	cfg    BudgetConfig
	runner uow.Runner
	store  BudgetStore
	// names holds the secret that names the budgets' mailboxes.
	names *keyring.Names
}

// NewBudget returns the budget of cfg, which spends in units of work of
// runner, keeps its spends in store, and names mailboxes by a keyed hash
// under a secret of keys.
func NewBudget(cfg BudgetConfig, runner uow.Runner, store BudgetStore, keys *keyring.Keyring) (*Budget, error) {
	var errs []error
	if cfg.Limit < 1 {
		errs = append(errs, fmt.Errorf("a limit of at least 1, got %d", cfg.Limit))
	}
	if cfg.Window <= 0 {
		errs = append(errs, fmt.Errorf("a positive window, got %s", cfg.Window))
	}
	if runner == nil || store == nil || keys == nil {
		errs = append(errs, errors.New("a runner, a store and a keyring"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("mail: new budget needs %w", err)
	}
	return &Budget{cfg: cfg, runner: runner, store: store, names: keyring.NewNames(keys, runner, budgetNamesSubject)}, nil
}

// Spend spends a unit of the budget of the mailbox that to reaches, for
// the outbox message id, in a short unit of work of its own, and reports
// whether the mail may be sent: not when the budget is spent and hold is
// set. A message that has spent already may be sent again and spends
// nothing. The error never names the address.
func (b *Budget) Spend(ctx context.Context, to string, id uuid.UUID, hold bool) (bool, error) {
	secret, err := b.names.Secret(ctx)
	if err != nil {
		return false, fmt.Errorf("mail: budget: %w", err)
	}
	mailbox := budgetName(secret, to)
	var send bool
	err = b.runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		spends, err := b.store.HoldBudget(ctx, tx, mailbox)
		if err != nil {
			return err
		}
		kept, ok, changed := b.cfg.spend(spends, id, tx.Now(), hold)
		send = ok
		if !changed {
			return nil
		}
		return b.store.KeepBudget(ctx, tx, mailbox, kept)
	})
	if err != nil {
		return false, fmt.Errorf("mail: budget: %w", err)
	}
	return send, nil
}

// spend decides a spend of message id at now on a budget that spent
// spends. It returns the spends to keep, those within the window, with
// id's when it spent; whether the mail may be sent; and whether the kept
// spends differ from spends.
func (c BudgetConfig) spend(spends []Spend, id uuid.UUID, now time.Time, hold bool) ([]Spend, bool, bool) {
	since := now.Add(-c.Window)
	kept := make([]Spend, 0, len(spends)+1)
	for _, s := range spends {
		if s.At.After(since) {
			kept = append(kept, s)
		}
	}
	changed := len(kept) != len(spends)
	for _, s := range kept {
		if s.MessageID == id {
			return kept, true, changed
		}
	}
	if hold && len(kept) >= c.Limit {
		return kept, false, changed
	}
	return append(kept, Spend{MessageID: id, At: now}), true, true
}

// Sweep deletes the budgets of the mailboxes that were sent nothing for a
// window and a few minutes more (budgetSweepMargin), a batch per unit of
// work, and returns how many it deleted. The app runs it every
// SWEEP_INTERVAL; a spend drops its mailbox's older spends itself.
func (b *Budget) Sweep(ctx context.Context) (int64, error) {
	var total int64
	for {
		var n int64
		err := b.runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			var err error
			n, err = b.store.SweepBudgets(ctx, tx, tx.Now().Add(-b.cfg.Window-budgetSweepMargin), budgetSweepBatch)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("mail: sweep budgets: %w", err)
		}
		total += n
		if n < budgetSweepBatch {
			return total, nil
		}
	}
}

// budgetName returns the name of the budget of the mailbox that address
// reaches, under secret ([keyring.Name]).
func budgetName(secret []byte, address string) string {
	return keyring.Name(secret, Mailbox(address))
}
