package user

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// ErrNoSuchSession is a session ID that names no live session of the
// caller's account.
var ErrNoSuchSession = errors.New("user: no such session")

// Why a session ended, as [SessionEnded.Reason] says it.
const (
	// EndedBySignOut: the session signed itself out. Events written
	// before sessions had reasons all mean this.
	EndedBySignOut = ""
	// EndedByOwner: another session of the account ended it
	// ([Service.EndSession], [Service.EndOtherSessions]).
	EndedByOwner = "ended_by_owner"
	// EndedByEmailChange: a confirmed change of address ended every
	// session but the one that confirmed it ([Service.ConfirmEmailChange]).
	EndedByEmailChange = "email_changed"
	// EndedByUndo: the undoing of a change of address ended every session
	// ([Service.UndoEmailChange]).
	EndedByUndo = "email_change_undone"
)

// touchEvery is how stale a session's last use may grow before a request
// writes it again: at most one write a minute per session, however often
// it is used.
const touchEvery = time.Minute

// SessionInfo is a live session as its account's owner sees it.
type SessionInfo struct {
	// ID names the session; it is not its token, and cannot be used as one.
	ID        uuid.UUID
	StartedAt time.Time
	// LastUsedAt is when the session was last used, to within
	// a minute.
	LastUsedAt time.Time
	ExpiresAt  time.Time
	// Client describes the client that signed in, such as "Firefox on
	// Linux", or is "" when it is not known.
	Client string
	// Current is true for the session the list was asked with.
	Current bool
}

// clientKey is the context key of [WithClient].
type clientKey struct{}

// WithClient returns ctx carrying a coarse description of the client that
// makes the request, such as "Firefox on Linux". A sign-in in ctx records
// it with the session it starts, for the owner's list of sessions; it is
// never a full User-Agent, and never an address.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

// clientOf returns the description [WithClient] put in ctx, cut to 100
// bytes of whole characters.
func clientOf(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	if len(c) > 100 {
		c = strings.ToValidUTF8(c[:100], "")
	}
	return c
}

// Sessions returns the live sessions of the account of token, the most
// recently used first, with the caller's marked. It returns
// [ErrUnauthenticated].
func (s *Service) Sessions(ctx context.Context, token string) ([]SessionInfo, error) {
	var (
		list    []SessionInfo
		current SessionRow
		stale   bool
	)
	err := s.commands.Read(ctx, "user.Sessions", func(ctx context.Context, tx uow.Tx) error {
		var err error
		if current, err = s.liveSession(ctx, tx, token); err != nil {
			return err
		}
		stale = tx.Now().Sub(lastUsed(current)) >= touchEvery
		rows, err := s.liveSessions(ctx, tx, current.UserID)
		if err != nil {
			return err
		}
		list = make([]SessionInfo, 0, len(rows))
		for _, r := range rows {
			list = append(list, SessionInfo{
				ID: r.ID, StartedAt: r.StartedAt, LastUsedAt: lastUsed(r), ExpiresAt: r.ExpiresAt,
				Client: r.Client, Current: r.TokenHash == current.TokenHash,
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if now := s.touch(ctx, current, stale); !now.IsZero() {
		for i := range list {
			if list[i].Current {
				list[i].LastUsedAt = now
			}
		}
	}
	slices.SortStableFunc(list, func(a, b SessionInfo) int { return b.LastUsedAt.Compare(a.LastUsedAt) })
	return list, nil
}

// EndSession ends the session with id of the account of token: another
// of the owner's sessions, or the caller's own, which is then a sign-out.
// It returns [ErrUnauthenticated] or [ErrNoSuchSession].
func (s *Service) EndSession(ctx context.Context, token string, id uuid.UUID) error {
	return s.commands.Do(ctx, "user.EndSession", func(ctx context.Context, tx uow.Tx) error {
		acct, hash, err := s.authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		rows, err := s.liveSessions(ctx, tx, acct.id)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(rows, func(r SessionRow) bool { return r.ID == id })
		if i < 0 {
			return fmt.Errorf("%w: %s", ErrNoSuchSession, id)
		}
		reason := EndedByOwner
		if rows[i].TokenHash == hash {
			reason = EndedBySignOut
		}
		e, err := sessionEnded(ctx, rows[i].TokenHash, reason)
		if err != nil {
			return err
		}
		_, err = s.appendAndApply(ctx, tx, userStream(acct.id), eventstore.Exactly(acct.version), e)
		return err
	})
}

// EndOtherSessions ends every live session of the account of token but
// the caller's, and returns how many it ended. It returns
// [ErrUnauthenticated].
func (s *Service) EndOtherSessions(ctx context.Context, token string) (int, error) {
	var n int
	err := s.commands.Do(ctx, "user.EndOtherSessions", func(ctx context.Context, tx uow.Tx) error {
		acct, hash, err := s.authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		ended, err := s.endSessions(ctx, tx, acct.id, hash, EndedByOwner)
		if err != nil {
			return err
		}
		n = len(ended)
		if n == 0 {
			return nil
		}
		_, err = s.appendAndApply(ctx, tx, userStream(acct.id), eventstore.Exactly(acct.version), ended...)
		return err
	})
	return n, err
}

// endSessions returns a [SessionEnded] with reason for each live session
// of the account id but the one whose token hash is keep ("" keeps none).
func (s *Service) endSessions(ctx context.Context, tx uow.Tx, id uuid.UUID, keep, reason string) ([]eventstore.Event, error) {
	rows, err := s.liveSessions(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	var events []eventstore.Event
	for _, r := range rows {
		if keep != "" && r.TokenHash == keep {
			continue
		}
		e, err := sessionEnded(ctx, r.TokenHash, reason)
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	return events, nil
}

// sessionEnded returns the [SessionEnded] of the session whose token
// hash, in hex as the views key it, is tokenHash.
func sessionEnded(ctx context.Context, tokenHash, reason string) (eventstore.Event, error) {
	h, err := ParseTokenHash(tokenHash)
	if err != nil {
		return eventstore.Event{}, err
	}
	return event(ctx, SessionEnded{TokenHash: h, Reason: reason})
}

// upcastSessionV1 turns version 1 of [SessionStarted] or of
// [SessionEnded] into version 2: it drops user_id, which was always the
// account whose stream holds the event ([UserOf]), and writes token_hash,
// 64 hex digits in version 1, in base64 ([TokenHash]). The other fields
// stay as they are.
func upcastSessionV1(e eventstore.Event) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.Data, &fields); err != nil {
		return nil, err
	}
	var hexHash string
	if err := json.Unmarshal(fields["token_hash"], &hexHash); err != nil {
		return nil, fmt.Errorf("token_hash: %w", err)
	}
	h, err := ParseTokenHash(hexHash)
	if err != nil {
		return nil, err
	}
	if fields["token_hash"], err = json.Marshal(h); err != nil {
		return nil, err
	}
	delete(fields, "user_id")
	return json.Marshal(fields)
}

// liveSessions returns the sessions of the account id that have not
// expired by the unit of work's clock.
func (s *Service) liveSessions(ctx context.Context, tx uow.Tx, id uuid.UUID) ([]SessionRow, error) {
	rows, err := s.Views.Sessions(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(rows, func(r SessionRow) bool { return !tx.Now().Before(r.ExpiresAt) }), nil
}

// lastUsed returns when the session r was last used: its start, when no
// use of it was written since.
func lastUsed(r SessionRow) time.Time {
	if r.LastUsedAt.After(r.StartedAt) {
		return r.LastUsedAt
	}
	return r.StartedAt
}

// touch records, in a unit of work of its own, that the session r is used
// now, when a read found its last use stale (written at least
// [touchEvery] ago), and returns the time it wrote, or zero when it wrote
// nothing. The last use is a hint for the owner: a write of it that fails
// loses only that, so its error is not the request's.
func (s *Service) touch(ctx context.Context, r SessionRow, stale bool) time.Time {
	if !stale {
		return time.Time{}
	}
	var at time.Time
	err := s.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		at = tx.Now()
		return s.Views.TouchSession(ctx, tx, r.TokenHash, at)
	})
	if err != nil {
		return time.Time{}
	}
	return at
}

// touchIn is [Service.touch] for a command, whose unit of work writes the
// last use itself.
func (s *Service) touchIn(ctx context.Context, tx uow.Tx, r SessionRow) error {
	if tx.Now().Sub(lastUsed(r)) < touchEvery {
		return nil
	}
	return s.Views.TouchSession(ctx, tx, r.TokenHash, tx.Now())
}
