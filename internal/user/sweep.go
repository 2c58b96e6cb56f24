package user

import (
	"context"
	"fmt"

	"github.com/eventsourced/accounts/internal/aggregate"
	"github.com/eventsourced/accounts/internal/uow"
)

// Sweep deletes the rows of links and sessions that expired more than a
// few minutes ago ([aggregate.SweepMargin]) from the views
// ([Views.Sweep]), a batch per unit of work, and returns how many it
// deleted. The app runs it every SWEEP_INTERVAL, so that the views stay as
// small as what is live however many links are asked for and never used.
func (s *Service) Sweep(ctx context.Context) (int64, error) {
	return s.commands.Job(ctx, "user.Sweep", s.sweep)
}

func (s *Service) sweep(ctx context.Context) (int64, error) {
	n, err := s.commands.InBatches(ctx, "user.Sweep batch", func(ctx context.Context, tx uow.Tx) (int64, error) {
		return s.Views.Sweep(ctx, tx, tx.Now().Add(-aggregate.SweepMargin), aggregate.SweepBatch)
	})
	if err != nil {
		return n, fmt.Errorf("user: sweep: %w", err)
	}
	return n, nil
}

// ForgetIdleAddresses forgets the keys of each address that has asked for
// no link for longer than a link can count against its limit or sign in,
// and a few minutes more ([aggregate.SweepMargin]), which erases the
// address wherever its sign-in stream holds it; it appends
// [SignInForgotten] to that stream and drops the events before it
// ([eventstore.Store.Truncate]), which no decision needs any more. It
// returns how many addresses it forgot. The app runs it every
// SWEEP_INTERVAL, so that the log keeps an address that only ever asked
// for a link no longer than that link mattered.
//
// Each address is forgotten in a unit of work of its own, which holds its
// stream ([eventstore.Store.Lock]) as a sign-in and an erasure do, and
// asks again whether the address's keys have all expired: one asked for
// since keeps its stream and its keys, and one asked for while the unit of
// work runs fails the marker's append, which is then tried again.
func (s *Service) ForgetIdleAddresses(ctx context.Context) (int64, error) {
	return s.commands.Job(ctx, "user.ForgetIdleAddresses", s.forgetIdleAddresses)
}

func (s *Service) forgetIdleAddresses(ctx context.Context) (int64, error) {
	var total int64
	after := ""
	for {
		var streams []string
		err := s.commands.Read(ctx, "user.ForgetIdleAddresses batch", func(ctx context.Context, tx uow.Tx) error {
			var err error
			streams, err = s.Keys.ExpiredSubjects(ctx, tx, signInPrefix, after, tx.Now().Add(-aggregate.SweepMargin), aggregate.SweepBatch)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("user: forget idle addresses: %w", err)
		}
		if len(streams) == 0 {
			return total, nil
		}
		for _, stream := range streams {
			forgot, err := s.forgetIdle(ctx, stream)
			if err != nil {
				return total, fmt.Errorf("user: forget idle addresses: %w", err)
			}
			if forgot {
				total++
			}
		}
		after = streams[len(streams)-1]
	}
}

// ForgetSettledChanges forgets the keys of the changes of address that can
// no longer be confirmed, a few minutes past ([aggregate.SweepMargin]),
// which erases the addresses they asked for: those may be other people's,
// and no decision needs them any more. It goes a batch per unit of work
// and returns how many it forgot; the app runs it every SWEEP_INTERVAL.
func (s *Service) ForgetSettledChanges(ctx context.Context) (int64, error) {
	return s.commands.Job(ctx, "user.ForgetSettledChanges", s.forgetSettledChanges)
}

func (s *Service) forgetSettledChanges(ctx context.Context) (int64, error) {
	n, err := s.commands.InBatches(ctx, "user.ForgetSettledChanges batch", func(ctx context.Context, tx uow.Tx) (int64, error) {
		return s.Keys.ForgetExpired(ctx, tx, changePrefix, tx.Now().Add(-aggregate.SweepMargin), aggregate.SweepBatch)
	})
	if err != nil {
		return n, fmt.Errorf("user: forget settled changes: %w", err)
	}
	return n, nil
}

// forgetIdle forgets the sign-in stream of an idle address, unless a link
// was asked for since its keys expired, and reports whether it did.
func (s *Service) forgetIdle(ctx context.Context, stream string) (bool, error) {
	var forgot bool
	err := s.commands.Do(ctx, "user.ForgetIdleAddresses forget", func(ctx context.Context, tx uow.Tx) error {
		forgot = false
		if err := s.Events.Lock(ctx, tx, stream); err != nil {
			return err
		}
		links, err := s.loadSignInLinks(ctx, tx, stream)
		if err != nil {
			return err
		}
		// Read after the version: a link asked for since has a key
		// that has not expired, or appends past the version.
		idle, err := s.Keys.Expired(ctx, tx, stream, tx.Now().Add(-aggregate.SweepMargin))
		if err != nil || !idle {
			return err
		}
		if err := s.forgetSignIn(ctx, tx, stream, links); err != nil {
			return err
		}
		forgot = true
		return nil
	})
	return forgot, err
}
