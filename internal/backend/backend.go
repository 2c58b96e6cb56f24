package backend

import (
	"context"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// Backend is a database open for the service, and every port over it.
// Its methods other than Migrate, Ping and Close make no round trip: they
// hand out values that share the Backend's connections, and stop working
// once it is closed.
type Backend interface {
	// Migrate applies every migration the database lacks, and returns the
	// versions it applied. Instances that migrate at once take turns.
	Migrate(ctx context.Context) ([]int64, error)
	// Runner returns a unit-of-work runner whose transactions take their
	// time from now; nil means time.Now.
	Runner(now func() time.Time) uow.Runner
	// Events returns the event store.
	Events() eventstore.Store
	// Outbox returns the outbox store, with what the relay, the
	// operators and an erasure use of it.
	Outbox() Outbox
	// Views returns the user domain's views, the tables that
	// [user.ViewsProjection] writes in the units of work of its commands.
	Views() user.Views
	// OrgViews returns the organizations domain's views, the tables that
	// its views projection writes in the units of work of its commands.
	OrgViews() org.Views
	// Log returns the event log as asynchronous projections follow it,
	// its subscribers configured by cfg (zero fields: the backend's
	// defaults).
	Log(cfg async.LogConfig) async.Log
	// ActivityStore returns the tables of the account activity
	// projection, which [user.ActivityProjection] writes over [Backend.Log],
	// and their reads.
	ActivityStore() user.ActivityStore
	// DataKeys returns the keyring's store of wrapped data keys.
	DataKeys() keyring.Store
	// MailBudgets returns the store of what each mailbox has spent of
	// its mail budget, which [mail.Budget] spends where mail is
	// delivered.
	MailBudgets() mail.BudgetStore
	// Ping reports whether the database answers. An error that says it
	// cannot be reached, or is busy, wraps [uow.ErrUnavailable].
	Ping(ctx context.Context) error
	// Close closes the connections, waiting for the units of work still
	// running.
	Close() error
}

// Outbox is a backend's outbox store: what the relay uses, what the
// operators use ([outbox.Operator]) and what an erasure uses
// ([outbox.Purger]).
type Outbox interface {
	outbox.RelayStore
	outbox.Operator
	outbox.Purger
}
