package user

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
)

// The kinds of an account's activity, as [Activity.Type] names them.
const (
	ActivityRegistered           = "registered"
	ActivitySignedIn             = "signed_in"
	ActivitySignedOut            = "signed_out"
	ActivityEmailChangeRequested = "email_change_requested"
	ActivityEmailChanged         = "email_changed"
	// ActivitySessionEnded is a session ended otherwise than by its own
	// sign-out; Detail is why ([SessionEnded.Reason]).
	ActivitySessionEnded      = "session_ended"
	ActivityEmailChangeUndone = "email_change_undone"
)

// Activity is one thing that happened to an account, as the account's
// owner sees it.
type Activity struct {
	Type string
	At   time.Time
	// Detail says more where there is more to say: the address a change
	// of address, or its undoing, made, which was the account's own; why
	// a session ended. The address a change
	// asked for is not shown: it may be another person's, and their
	// erasure could not reach it here. It is never a code or a token.
	Detail string
	// Position is the event's place in the log; pages of activity are cut
	// by it ([ActivityCursor]).
	Position eventstore.Position
}

// ActivityRow is one row of the activity: an account and one thing that
// happened to it.
type ActivityRow struct {
	UserID uuid.UUID
	Activity
}

// ActivityStore is the tables of the activity read model, one per version,
// and the reads of the version that serves. Each backend implements it;
// what an event adds to it is decided by [ActivityProjection]. Writes work
// in the transaction of a subscriber of the backend's log.
type ActivityStore interface {
	// Create makes version's table, unless it exists.
	Create(ctx context.Context, tx uow.Tx, version int) error
	// Serve points the reads at version's table from tx's commit on; a read
	// in flight finishes on the table it began on.
	Serve(ctx context.Context, tx uow.Tx, version int) error
	// Drop removes version's table, waiting for reads of it in flight.
	Drop(ctx context.Context, tx uow.Tx, version int) error
	// Reset empties version's table.
	Reset(ctx context.Context, tx uow.Tx, version int) error
	// Append adds rows to version's table; a row whose account and position
	// it holds already is left as it is.
	Append(ctx context.Context, tx uow.Tx, version int, rows ...ActivityRow) error
	// DeleteUser deletes every row of the account id from version's table.
	DeleteUser(ctx context.Context, tx uow.Tx, version int, id uuid.UUID) error
	// Page returns up to limit items of the account's activity older than
	// before (the newest when before is nil), newest first, from the
	// version that serves, and whether more are older still.
	Page(ctx context.Context, id uuid.UUID, before *eventstore.Position, limit int) ([]Activity, bool, error)
}

// ActivitySource is another domain's part of accounts' activity: the
// events of its own that record something of an account, which the
// activity follows beside the accounts' own ([ActivityProjection.Sources]).
// The domain that keeps those events implements it, since this package
// cannot know them.
type ActivitySource interface {
	// ActivityTypes returns the event types the source makes activity of;
	// none may be a type of this package's, nor another source's.
	ActivityTypes() []string
	// Activity returns the rows that events, a batch of the source's
	// types in log order, add to accounts' activity, in that order: each
	// row at the Position of the event that records it, and at its
	// RecordedAt, with at most one row of an account for an event. It
	// works in tx, the transaction of a subscriber of the log (or of a
	// rebuild), and may read there what it needs, the streams of the
	// events among it ([eventstore.Store.Load]). It must give the same
	// rows whenever it is asked, since a rebuild asks again: what it reads
	// must be fixed by the log up to the events, as a stream's events
	// before them are, and not by what happened since.
	Activity(ctx context.Context, tx uow.Tx, events []eventstore.Event) ([]ActivityRow, error)
}

// ActivityProjection is the asynchronous projection of accounts' activity
// ([projections.Rebuildable]): it decides which events become which rows
// of the [ActivityStore] ([ActivityOf]) and which erase an account's rows,
// and writes them there. Keys opens the addresses a row shows; Log is the
// event log the projection follows, which says how far behind it is. Its
// zero version is version 1; a rebuild builds the next version beside it
// ([ActivityProjection.At]).
type ActivityProjection struct {
	Store ActivityStore
	Log   projections.Log
	Keys  *keyring.Keyring
	// Sources are the other domains whose events add to the activity,
	// such as an account's joins of organizations. An [Erased] deletes
	// the account's rows before it, the sources' too; a source must
	// record nothing of the account after it.
	Sources []ActivitySource
	version int
}

var _ projections.Rebuildable = ActivityProjection{}

// Name names the projection.
func (ActivityProjection) Name() string { return "activity" }

// Version is the version the projection writes. Every version has one
// shape of rows, so a new kind of row, such as a new source's, needs no
// new version: the version that serves follows the new types from where
// it stands, and a rebuild adds the rows of their events before it.
func (p ActivityProjection) Version() int { return max(p.version, 1) }

// At returns the projection writing version v.
func (p ActivityProjection) At(v int) projections.Rebuildable {
	p.version = v
	return p
}

// Types are the event types an account's activity is made of: its own
// ([ActivityTypes]) and those of its sources.
func (p ActivityProjection) Types() []string {
	types := ActivityTypes()
	for _, src := range p.Sources {
		types = append(types, src.ActivityTypes()...)
	}
	slices.Sort(types)
	return slices.Compact(types)
}

// Create makes the version's table.
func (p ActivityProjection) Create(ctx context.Context, tx uow.Tx) error {
	return p.wrap("create", p.Store.Create(ctx, tx, p.Version()))
}

// Serve points the reads at the version's table.
func (p ActivityProjection) Serve(ctx context.Context, tx uow.Tx) error {
	return p.wrap("serve", p.Store.Serve(ctx, tx, p.Version()))
}

// Drop removes the version's table.
func (p ActivityProjection) Drop(ctx context.Context, tx uow.Tx) error {
	return p.wrap("drop", p.Store.Drop(ctx, tx, p.Version()))
}

// Reset empties the version's table.
func (p ActivityProjection) Reset(ctx context.Context, tx uow.Tx) error {
	return p.wrap("reset", p.Store.Reset(ctx, tx, p.Version()))
}

func (p ActivityProjection) wrap(op string, err error) error {
	if err != nil {
		return fmt.Errorf("user: activity: %s: %w", op, err)
	}
	return nil
}

// Apply records the activity of events in tx, a subscriber's transaction:
// a row for each event that records one ([ActivityOf]), the rows of the
// sources' events, each source asked once for the batch, and, for each
// [Erased], the deletion of the account's rows. The rows go to the store
// in one call for the whole batch, or for those before an erasure, which
// deletes the account's rows after them. An event recorded already is left
// as it is ([projections.Projection]). The events are a batch of tx's,
// which reads each account's key once.
func (p ActivityProjection) Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error {
	ctx = keyring.Within(ctx, tx)
	sourced, err := p.sourced(ctx, tx, events)
	if err != nil {
		return p.wrap("apply", err)
	}
	b := &activityBatch{keys: p.Keys}
	for _, e := range events {
		if rows, ok := sourced[e.Position]; ok {
			for _, r := range rows {
				b.ops = append(b.ops, activityOp{row: r})
			}
			continue
		}
		if err := activityHandlers.Apply(ctx, tx, b, e); err != nil {
			return p.wrap("apply", fmt.Errorf("%s %s: %w", e.Type, e.ID, err))
		}
	}
	var rows []ActivityRow
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		err := p.Store.Append(ctx, tx, p.Version(), rows...)
		rows = rows[:0]
		return err
	}
	for _, op := range b.ops {
		if op.erase == uuid.Nil {
			rows = append(rows, op.row)
			continue
		}
		if err := flush(); err != nil {
			return p.wrap("apply", err)
		}
		if err := p.Store.DeleteUser(ctx, tx, p.Version(), op.erase); err != nil {
			return p.wrap("apply", err)
		}
	}
	return p.wrap("apply", flush())
}

// sourced returns the rows of the events of the sources' types among
// events, by the position of the event that records them: an entry,
// maybe empty, for each such event. Each source is asked once, for its
// events in their order.
func (p ActivityProjection) sourced(ctx context.Context, tx uow.Tx, events []eventstore.Event) (map[eventstore.Position][]ActivityRow, error) {
	if len(p.Sources) == 0 {
		return nil, nil
	}
	of, err := p.sourceOfTypes()
	if err != nil {
		return nil, err
	}
	batches := make([][]eventstore.Event, len(p.Sources))
	out := map[eventstore.Position][]ActivityRow{}
	at := map[eventstore.Position]eventstore.Event{}
	for _, e := range events {
		if i, ok := of[e.Type]; ok {
			if _, dup := at[e.Position]; dup {
				return nil, fmt.Errorf("%s %s: two events at %s", e.Type, e.ID, projections.FormatPosition(e.Position))
			}
			batches[i] = append(batches[i], e)
			out[e.Position], at[e.Position] = nil, e
		}
	}
	type key struct {
		user uuid.UUID
		at   eventstore.Position
	}
	seen := map[key]bool{}
	for i, batch := range batches {
		if len(batch) == 0 {
			continue
		}
		rows, err := p.Sources[i].Activity(ctx, tx, batch)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			e, ok := at[r.Position]
			switch {
			case !ok || of[e.Type] != i:
				return nil, fmt.Errorf("a row of %s at %s, the position of none of the events it was given", r.UserID, projections.FormatPosition(r.Position))
			case r.UserID == uuid.Nil:
				return nil, fmt.Errorf("%s %s: a row of no account", e.Type, e.ID)
			case !r.At.Equal(e.RecordedAt):
				return nil, fmt.Errorf("%s %s: a row at %s, not at the event's time", e.Type, e.ID, r.At)
			case seen[key{r.UserID, r.Position}]:
				return nil, fmt.Errorf("%s %s: two rows of %s", e.Type, e.ID, r.UserID)
			}
			seen[key{r.UserID, r.Position}] = true
			out[r.Position] = append(out[r.Position], r)
		}
	}
	return out, nil
}

// sourceOfTypes returns the index in Sources of the source of each of
// their types, or an error when a type is this package's or two
// sources'.
func (p ActivityProjection) sourceOfTypes() (map[string]int, error) {
	of := map[string]int{}
	for i, src := range p.Sources {
		for _, typ := range src.ActivityTypes() {
			if _, ok := events.GoType(typ); ok {
				return nil, fmt.Errorf("a source of activity follows %s, an event type of the accounts' own", typ)
			}
			if j, ok := of[typ]; ok && j != i {
				return nil, fmt.Errorf("two sources of activity follow %s", typ)
			}
			of[typ] = i
		}
	}
	return of, nil
}

// activityBatch is what a batch of events does to the activity, in order:
// rows to add, and accounts whose rows to delete.
type activityBatch struct {
	keys *keyring.Keyring
	ops  []activityOp
}

// activityOp adds row, or, when erase is not nil, deletes the rows of
// that account.
type activityOp struct {
	row   ActivityRow
	erase uuid.UUID
}

// add adds the activity of type typ, with detail, that e records of the
// account id.
func (b *activityBatch) add(id uuid.UUID, e eventstore.Event, typ, detail string) error {
	if id == uuid.Nil {
		return errors.New("no user_id")
	}
	b.ops = append(b.ops, activityOp{row: ActivityRow{UserID: id, Activity: Activity{
		Type: typ, At: e.RecordedAt, Detail: detail, Position: e.Position,
	}}})
	return nil
}

// address returns the address that value, a field of e, holds, or ""
// when it is erased ([Address]).
func (b *activityBatch) address(ctx context.Context, tx uow.Tx, e eventstore.Event, value string) (string, error) {
	email, ok, err := Address(ctx, tx, b.keys, e, value)
	if err != nil || !ok {
		return "", err
	}
	return email, nil
}

// activityCategory is the category of the events the activity follows:
// those of the accounts' streams.
const activityCategory = CategoryUser

// activityHandlers decide what each event of an account's stream adds to
// its activity.
var activityHandlers = func() *projections.Handlers[*activityBatch] {
	h := projections.NewHandlers[*activityBatch](events)
	projections.Handle(h, func(_ context.Context, _ uow.Tx, b *activityBatch, e eventstore.Event, d Registered) error {
		return b.add(d.UserID, e, ActivityRegistered, "")
	})
	// The session events leave the account to their stream.
	projections.Handle(h, func(_ context.Context, _ uow.Tx, b *activityBatch, e eventstore.Event, _ SessionStarted) error {
		id, err := UserOf(e)
		if err != nil {
			return err
		}
		return b.add(id, e, ActivitySignedIn, "")
	})
	projections.Handle(h, func(_ context.Context, _ uow.Tx, b *activityBatch, e eventstore.Event, d SessionEnded) error {
		id, err := UserOf(e)
		if err != nil {
			return err
		}
		if d.Reason != EndedBySignOut {
			return b.add(id, e, ActivitySessionEnded, d.Reason)
		}
		return b.add(id, e, ActivitySignedOut, "")
	})
	// The address a change asked for is not shown: it may be another
	// person's, and their erasure could not reach it here.
	projections.Handle(h, func(_ context.Context, _ uow.Tx, b *activityBatch, e eventstore.Event, d EmailChangeRequested) error {
		return b.add(d.UserID, e, ActivityEmailChangeRequested, "")
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, b *activityBatch, e eventstore.Event, d EmailChanged) error {
		email, err := b.address(ctx, tx, e, d.NewEmail)
		if err != nil {
			return err
		}
		return b.add(d.UserID, e, ActivityEmailChanged, email)
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, b *activityBatch, e eventstore.Event, d EmailChangeUndone) error {
		email, err := b.address(ctx, tx, e, d.Email)
		if err != nil {
			return err
		}
		return b.add(d.UserID, e, ActivityEmailChangeUndone, email)
	})
	projections.Handle(h, func(_ context.Context, _ uow.Tx, b *activityBatch, _ eventstore.Event, d Erased) error {
		if d.UserID == uuid.Nil {
			return errors.New("no user_id")
		}
		b.ops = append(b.ops, activityOp{erase: d.UserID})
		return nil
	})
	return h
}()

// Page returns up to limit items of the account's activity older than
// before (the newest when before is nil), newest first, and whether more
// are older still.
func (p ActivityProjection) Page(ctx context.Context, id uuid.UUID, before *eventstore.Position, limit int) ([]Activity, bool, error) {
	items, more, err := p.Store.Page(ctx, id, before, limit)
	if err != nil {
		return nil, false, fmt.Errorf("user: activity: %w", err)
	}
	return items, more, nil
}

// Behind counts the events of the projection's types in the log that the
// version serving reads has not applied yet.
func (p ActivityProjection) Behind(ctx context.Context) (int64, error) {
	return projections.ServingBehind(ctx, p.Log, p)
}

// ActivityTypes are the event types an account's activity is made of, and
// [TypeErased], which ends it.
func ActivityTypes() []string { return activityHandlers.Types() }

// ActivityOf returns the account and the activity that e records, and false
// for an event that records none: an [Erased], or an event of another
// category than the accounts' streams, whose activity, if any, is its
// domain's to say ([ActivitySource]). The address it names is opened
// with keys ([Address]); an erased one leaves the detail empty.
func ActivityOf(ctx context.Context, tx uow.Tx, keys *keyring.Keyring, e eventstore.Event) (uuid.UUID, Activity, bool, error) {
	if eventstore.CategoryOf(e.Type) != activityCategory {
		return uuid.Nil, Activity{}, false, nil
	}
	b := &activityBatch{keys: keys}
	if err := activityHandlers.Apply(ctx, tx, b, e); err != nil {
		return uuid.Nil, Activity{}, false, fmt.Errorf("user: activity of %s %s: %w", e.Type, e.ID, err)
	}
	if len(b.ops) == 0 || b.ops[0].erase != uuid.Nil {
		return uuid.Nil, Activity{}, false, nil
	}
	return b.ops[0].row.UserID, b.ops[0].row.Activity, true, nil
}

// ErrBadCursor is returned for a cursor that no page of activity gave.
var ErrBadCursor = errors.New("user: bad activity cursor")

// ActivityCursor returns the cursor of the page that comes after an item
// at p, newest first: everything older than p.
func ActivityCursor(p eventstore.Position) string {
	return strconv.FormatUint(p.Commit, 10) + "." + strconv.FormatInt(p.Seq, 10)
}

// ParseActivityCursor returns the position a cursor of [ActivityCursor]
// names, or an error wrapping [ErrBadCursor].
func ParseActivityCursor(s string) (eventstore.Position, error) {
	c, q, ok := strings.Cut(s, ".")
	if !ok {
		return eventstore.Position{}, fmt.Errorf("%w: %q", ErrBadCursor, s)
	}
	commit, err1 := strconv.ParseUint(c, 10, 63)
	seq, err2 := strconv.ParseInt(q, 10, 64)
	if err1 != nil || err2 != nil || seq < 0 || c != strconv.FormatUint(commit, 10) || q != strconv.FormatInt(seq, 10) {
		return eventstore.Position{}, fmt.Errorf("%w: %q", ErrBadCursor, s)
	}
	return eventstore.Position{Commit: commit, Seq: seq}, nil
}
