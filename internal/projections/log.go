package projections

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// Log is a backend's event log as it keeps account of its projections:
// how far each consumer group has come ([Group]), where one stopped, and
// which versions of a projection serve reads and are being built (the
// registry). Asynchronous projections follow the log through a
// subscriber of its own (package async, whose Log adds one to this); what
// is here is what a projection, a rebuild and an operator ask of it, and
// needs no message library.
type Log interface {
	// Behind counts the events of the given types (all, when empty) that
	// group has still to apply, and returns when the oldest of them was
	// recorded: zero when none is left. The count is honest even when the
	// log's order is broken, as a logical copy of a database into another
	// server can break it: events the group's subscribers will never
	// reach in order (they sort before its offset but came after it, or
	// lie where no reader gets) are counted, and the error, which then
	// comes with the count and the time, wraps [ErrLogOrder].
	Behind(ctx context.Context, group string, types []string) (int64, time.Time, error)
	// Fail records, outside any subscriber's transaction, that group has
	// stopped at f.Position; the group's next applied event clears it.
	Fail(ctx context.Context, group string, f Failure) error
	// Failure returns the failure recorded for group, and false when it
	// has none.
	Failure(ctx context.Context, group string) (Failure, bool, error)
	// Versions returns the registry's versions of the projection name;
	// one the registry does not hold yet serves base.
	Versions(ctx context.Context, name string, base int) (Versions, error)
	// Catalog runs fn in a transaction of its own, outside any
	// subscriber's, that holds the registry's entry of name (made at base
	// when missing) until it commits, and stores the versions fn returns.
	// Two calls for one name take turns.
	Catalog(ctx context.Context, name string, base int, fn func(ctx context.Context, tx uow.Tx, v Versions) (Versions, error)) error
	// Forget removes group's offset, and its failure, as part of tx, a
	// transaction of Catalog, so that the group starts again at the log's
	// start when it next subscribes; it waits for a batch of the group in
	// flight to commit.
	Forget(ctx context.Context, tx uow.Tx, group string) error
	// Retire marks group's offset retired as part of tx, a transaction of
	// Catalog, waiting for a batch of the group in flight to commit: no
	// batch of the group reads anything afterwards, even one of a
	// subscriber that subscribes again, and Behind counts none for it.
	Retire(ctx context.Context, tx uow.Tx, group string) error
}

// ErrLogOrder is wrapped by the error of [Log.Behind] when the log holds
// events a group will never apply in order: its order was broken, as a
// logical copy of the database into another server that was not set
// right breaks it. Behind still counts them.
var ErrLogOrder = errors.New("projections: the event log is out of order")

// Failure is why a projection stopped.
type Failure struct {
	// At is when it stopped.
	At time.Time
	// Position is the event it could not apply.
	Position eventstore.Position
	// Error is what applying it said.
	Error string
}

// FormatPosition returns p as the text a backend keeps of a failure's
// position; [ParsePosition] reads it back.
func FormatPosition(p eventstore.Position) string {
	return strconv.FormatUint(p.Commit, 10) + "." + strconv.FormatInt(p.Seq, 10)
}

// ParsePosition reads a position of [FormatPosition].
func ParsePosition(s string) (eventstore.Position, error) {
	c, q, ok := strings.Cut(s, ".")
	commit, err1 := strconv.ParseUint(c, 10, 64)
	seq, err2 := strconv.ParseInt(q, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return eventstore.Position{}, fmt.Errorf("projections: position %q", s)
	}
	return eventstore.Position{Commit: commit, Seq: seq}, nil
}
