package user

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
)

// The kinds of an account's activity, as [Activity.Type] names them.
const (
	ActivityRegistered           = "registered"
	ActivitySignedIn             = "signed_in"
	ActivitySignedOut            = "signed_out"
	ActivityEmailChangeRequested = "email_change_requested"
	ActivityEmailChanged         = "email_changed"
)

// Activity is one thing that happened to an account, as the account's
// owner sees it.
type Activity struct {
	Type string
	At   time.Time
	// Detail says more where there is more to say: the address a change
	// of address made, which was the account's own. The address a change
	// asked for is not shown: it may be another person's, and their
	// erasure could not reach it here. It is never a code or a token.
	Detail string
	// Position is the event's place in the log; pages of activity are cut
	// by it ([ActivityCursor]).
	Position eventstore.Position
}

// ActivityProjection describes the asynchronous projection of accounts'
// activity: its name, version and the event types it applies. Each
// backend's activity embeds it. Its zero value is version 1; a rebuild
// builds the next version beside it ([ActivityProjection.AtVersion]).
type ActivityProjection struct {
	version int
}

// Name names the projection.
func (ActivityProjection) Name() string { return "activity" }

// Version is the version the projection writes; version v keeps its rows
// in the table [ActivityProjection.Table] names.
func (p ActivityProjection) Version() int { return max(p.version, 1) }

// AtVersion returns the projection at version v.
func (p ActivityProjection) AtVersion(v int) ActivityProjection {
	p.version = v
	return p
}

// Table names the table of the projection's version: activity_v1 for
// version 1, which migration 00005 makes.
func (p ActivityProjection) Table() string { return "activity_v" + strconv.Itoa(p.Version()) }

// Types are the event types an account's activity is made of.
func (ActivityProjection) Types() []string { return ActivityTypes() }

// ActivityTypes are the event types an account's activity is made of, and
// [TypeErased], which ends it.
func ActivityTypes() []string {
	return []string{TypeRegistered, TypeSessionStarted, TypeSessionEnded, TypeEmailChangeRequested, TypeEmailChanged, TypeErased}
}

// ActivityOf returns the account and the activity that e records, and false
// for an event that records none. The address it names is opened with keys
// ([Address]); an erased one leaves the detail empty.
func ActivityOf(ctx context.Context, tx uow.Tx, keys *keyring.Keyring, e eventstore.Event) (uuid.UUID, Activity, bool, error) {
	a := Activity{At: e.RecordedAt, Position: e.Position}
	switch e.Type {
	case TypeRegistered:
		a.Type = ActivityRegistered
	case TypeSessionStarted:
		a.Type = ActivitySignedIn
	case TypeSessionEnded:
		a.Type = ActivitySignedOut
	case TypeEmailChangeRequested:
		a.Type = ActivityEmailChangeRequested
	case TypeEmailChanged:
		a.Type = ActivityEmailChanged
	default:
		return uuid.Nil, Activity{}, false, nil
	}
	// Only the fields the activity shows, under the names the events give
	// them: a projection that follows the log decodes every event, and the
	// rest (times, hashes) would cost more than the activity's own write.
	d, err := eventstore.Decode[struct {
		UserID   uuid.UUID `json:"user_id"`
		NewEmail string    `json:"new_email"`
	}](e)
	if err != nil {
		return uuid.Nil, Activity{}, false, err
	}
	if d.UserID == uuid.Nil {
		return uuid.Nil, Activity{}, false, fmt.Errorf("user: activity of %s %s: no user_id", e.Type, e.ID)
	}
	if a.Type == ActivityEmailChanged {
		email, ok, err := Address(ctx, tx, keys, e, d.NewEmail)
		if err != nil {
			return uuid.Nil, Activity{}, false, err
		}
		if ok {
			a.Detail = email
		}
	}
	return d.UserID, a, true, nil
}

// EachActivity calls record with the account and the activity of each of
// events that records one ([ActivityOf]), and erase with the account of
// each [Erased], whose activity goes, in their order, and stops at the
// first error, which it returns naming the event. The events are a batch
// of tx's, which reads each account's key once.
func EachActivity(ctx context.Context, tx uow.Tx, keys *keyring.Keyring, events []eventstore.Event,
	record func(id uuid.UUID, a Activity) error, erase func(id uuid.UUID) error) error {
	ctx = keyring.Within(ctx, tx)
	for _, e := range events {
		var err error
		if e.Type == TypeErased {
			var d Erased
			if d, err = eventstore.Decode[Erased](e); err == nil {
				err = erase(d.UserID)
			}
		} else {
			var id uuid.UUID
			var a Activity
			var ok bool
			if id, a, ok, err = ActivityOf(ctx, tx, keys, e); err == nil && ok {
				err = record(id, a)
			}
		}
		if err != nil {
			return fmt.Errorf("activity of event %s: %w", e.ID, err)
		}
	}
	return nil
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
