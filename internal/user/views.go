package user

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
)

// Views are the tables of the domain's inline read models (users,
// sessions, unused sign-in codes and unused confirmation codes), written in
// the same transaction as the events they follow, and the queries the
// commands make of them. Each backend implements them; what an event does
// to them is decided by [ViewsProjection], so a backend only runs the
// operations it is given. Rows stay until an operation or a sweep removes
// them, expired or not: the service judges expiry.
//
// Every method works in the unit of work it is given, and returns an
// error wrapping [uow.ErrForeignTx] for one of another backend's.
type Views interface {
	// PutUser adds u. It returns an error wrapping [ErrEmailTaken] when
	// another user holds u.Email.
	PutUser(ctx context.Context, tx uow.Tx, u User) error
	// SetEmail moves the user with id to email. It returns an error
	// wrapping [ErrEmailTaken] when another user holds email.
	SetEmail(ctx context.Context, tx uow.Tx, id uuid.UUID, email string) error
	// DeleteUser deletes the user with id and every row that belongs to
	// them: their sessions and their last uses, their confirmation and
	// undo codes, and the sign-in codes sent to their address.
	DeleteUser(ctx context.Context, tx uow.Tx, id uuid.UUID) error
	// PutSession adds a session; its LastUsedAt is not written.
	PutSession(ctx context.Context, tx uow.Tx, s SessionRow) error
	// DeleteSession deletes the session with the token hash, if any, and
	// its last use.
	DeleteSession(ctx context.Context, tx uow.Tx, tokenHash string) error
	// TouchSession records that the session with the token hash was used
	// at, unless a later use is recorded. The last use of a session is no
	// event's: it is kept beside the views, and neither [Views.Reset] nor
	// a rebuild changes it.
	TouchSession(ctx context.Context, tx uow.Tx, tokenHash string, at time.Time) error
	// PutSignInCode adds a sign-in code.
	PutSignInCode(ctx context.Context, tx uow.Tx, c SignInCodeRow) error
	// DeleteSignInCode deletes the sign-in code with hash, if any.
	DeleteSignInCode(ctx context.Context, tx uow.Tx, codeHash string) error
	// PutChangeCode adds a confirmation code of a change of address.
	PutChangeCode(ctx context.Context, tx uow.Tx, c ChangeCodeRow) error
	// DeleteChangeCode deletes the confirmation code with hash, if any.
	DeleteChangeCode(ctx context.Context, tx uow.Tx, codeHash string) error
	// PutUndoCode adds the code that undoes a change of address.
	PutUndoCode(ctx context.Context, tx uow.Tx, c UndoCodeRow) error
	// DeleteUndoCode deletes the undo code with hash, if any.
	DeleteUndoCode(ctx context.Context, tx uow.Tx, codeHash string) error
	// Reset empties every table as part of tx, for a rebuild from the
	// events. Commands wait for the rebuild instead of writing into
	// half-built tables, and the rebuilt state need hold one address for
	// one user only at tx's commit.
	Reset(ctx context.Context, tx uow.Tx) error
	// Sweep deletes up to limit rows of each of sign-in codes,
	// confirmation codes, undo codes and sessions that expired at or
	// before now, with the last uses of the sessions it deletes, and
	// returns how many. The service refuses expired codes and sessions
	// whether their rows are there or not, so a sweep changes none of its
	// answers; it keeps the tables as small as what is live.
	Sweep(ctx context.Context, tx uow.Tx, now time.Time, limit int) (int64, error)

	// UserByEmail returns the user who holds email.
	UserByEmail(ctx context.Context, tx uow.Tx, email string) (User, bool, error)
	// User returns the user with id.
	User(ctx context.Context, tx uow.Tx, id uuid.UUID) (User, bool, error)
	// SignInCode returns the address the sign-in code with hash was sent to.
	SignInCode(ctx context.Context, tx uow.Tx, hash string) (string, bool, error)
	// EmailChangeCode returns the user who was sent the confirmation code
	// with hash.
	EmailChangeCode(ctx context.Context, tx uow.Tx, hash string) (uuid.UUID, bool, error)
	// UndoCode returns the undo code with hash.
	UndoCode(ctx context.Context, tx uow.Tx, hash string) (UndoCodeRow, bool, error)
	// Session returns the session with the token hash, with its last use.
	Session(ctx context.Context, tx uow.Tx, hash string) (SessionRow, bool, error)
	// Sessions returns every session of the user with id, expired or not,
	// with their last uses.
	Sessions(ctx context.Context, tx uow.Tx, id uuid.UUID) ([]SessionRow, error)
}

// SessionRow is a row of the sessions table.
type SessionRow struct {
	TokenHash string
	UserID    uuid.UUID
	// ID names the session to its owner: the ID of its [SessionStarted].
	ID        uuid.UUID
	StartedAt time.Time
	ExpiresAt time.Time
	// Client describes the client that started it ([WithClient]).
	Client string
	// LastUsedAt is the last use [Views.TouchSession] recorded, zero when
	// none; the views' queries fill it, their writes ignore it.
	LastUsedAt time.Time
}

// UndoCodeRow is a row of the codes that undo a change of address, mailed
// to the address the change left.
type UndoCodeRow struct {
	CodeHash string
	UserID   uuid.UUID
	// Version is that of the [EmailChanged] in the user's stream.
	Version   int64
	ExpiresAt time.Time
}

// SignInCodeRow is a row of the unused sign-in codes.
type SignInCodeRow struct {
	CodeHash  string
	Email     string
	ExpiresAt time.Time
}

// ChangeCodeRow is a row of the unused confirmation codes.
type ChangeCodeRow struct {
	CodeHash  string
	UserID    uuid.UUID
	ExpiresAt time.Time
}

// ViewsProjection is the domain's inline projection: it decides what each
// event does to the [Views] and runs it there, in the transaction that
// appended the event. The service applies it to what each command appends,
// and a rebuild ([projections.Rebuild]) to the whole log.
//
// Keys opens the addresses of the events ([Address]). An event whose
// address is erased adds no row: its account, or its address's links, are
// gone.
type ViewsProjection struct {
	Views Views
	Keys  *keyring.Keyring
}

// Name names the views.
func (ViewsProjection) Name() string { return "users" }

// Version numbers the views' shape.
func (ViewsProjection) Version() int { return 1 }

// Types returns the event types the views follow: every one of this domain
// but [TypeSignInForgotten], which only ends a sign-in stream's history.
func (ViewsProjection) Types() []string { return viewsHandlers.Types() }

// Reset empties the views as part of tx ([Views.Reset]).
func (p ViewsProjection) Reset(ctx context.Context, tx uow.Tx) error {
	if err := p.Views.Reset(ctx, tx); err != nil {
		return fmt.Errorf("user: views: %w", err)
	}
	return nil
}

// Apply updates the views with events appended in tx. It returns an
// error wrapping [ErrEmailTaken] when an event would give one address to
// two users.
func (p ViewsProjection) Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error {
	for _, e := range events {
		if err := viewsHandlers.Apply(ctx, tx, p, e); err != nil {
			return fmt.Errorf("user: views: apply %s %s: %w", e.Type, e.ID, err)
		}
	}
	return nil
}

// viewsHandlers decide what each event does to the views, and run it
// there.
var viewsHandlers = func() *projections.Handlers[ViewsProjection] {
	h := projections.NewHandlers[ViewsProjection](events)
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d SignInLinkRequested) error {
		email, ok, err := Address(ctx, tx, p.Keys, e, d.Email)
		if err != nil || !ok {
			return err
		}
		return p.Views.PutSignInCode(ctx, tx, SignInCodeRow{CodeHash: d.CodeHash, Email: email, ExpiresAt: d.ExpiresAt})
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, _ eventstore.Event, d SignInLinkUsed) error {
		return p.Views.DeleteSignInCode(ctx, tx, d.CodeHash)
	})
	// A forgotten stream's codes went with the events before it, or
	// expired: the sweep drops their rows.
	projections.Skip[SignInForgotten](h)
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d Registered) error {
		email, ok, err := Address(ctx, tx, p.Keys, e, d.Email)
		if err != nil || !ok {
			return err
		}
		return p.Views.PutUser(ctx, tx, User{ID: d.UserID, Email: email, CreatedAt: e.RecordedAt})
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d SessionStarted) error {
		id, err := UserOf(e)
		if err != nil {
			return err
		}
		return p.Views.PutSession(ctx, tx, SessionRow{
			TokenHash: d.TokenHash.Hex(), UserID: id, ID: e.ID,
			StartedAt: e.RecordedAt, ExpiresAt: d.ExpiresAt, Client: d.Client,
		})
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, _ eventstore.Event, d SessionEnded) error {
		return p.Views.DeleteSession(ctx, tx, d.TokenHash.Hex())
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, _ eventstore.Event, d EmailChangeRequested) error {
		return p.Views.PutChangeCode(ctx, tx, ChangeCodeRow{CodeHash: d.CodeHash, UserID: d.UserID, ExpiresAt: d.ExpiresAt})
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d EmailChanged) error {
		// The move first: it is what can fail on the data (the address
		// held by another user), and then nothing else has run.
		email, ok, err := Address(ctx, tx, p.Keys, e, d.NewEmail)
		if err != nil {
			return err
		}
		if ok {
			if err := p.Views.SetEmail(ctx, tx, d.UserID, email); err != nil {
				return err
			}
		}
		if d.UndoCodeHash != "" {
			err := p.Views.PutUndoCode(ctx, tx, UndoCodeRow{CodeHash: d.UndoCodeHash, UserID: d.UserID, Version: e.Version, ExpiresAt: d.UndoExpiresAt})
			if err != nil {
				return err
			}
		}
		return p.Views.DeleteChangeCode(ctx, tx, d.CodeHash)
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d EmailChangeUndone) error {
		email, ok, err := Address(ctx, tx, p.Keys, e, d.Email)
		if err != nil {
			return err
		}
		if ok {
			if err := p.Views.SetEmail(ctx, tx, d.UserID, email); err != nil {
				return err
			}
		}
		return p.Views.DeleteUndoCode(ctx, tx, d.CodeHash)
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, _ eventstore.Event, d Erased) error {
		return p.Views.DeleteUser(ctx, tx, d.UserID)
	})
	return h
}()
