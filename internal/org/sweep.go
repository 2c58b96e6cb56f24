package org

import (
	"context"
	"fmt"

	"github.com/eventsourced/accounts/internal/aggregate"
	"github.com/eventsourced/accounts/internal/uow"
)

// Sweep deletes the rows of the invitations that expired more than a few
// minutes ago ([aggregate.SweepMargin]) from the views ([Views.Sweep]),
// and forgets their keys ("invitation-ID"), which erases their addresses
// from the log: nobody accepted, revoked or voided them, and no decision
// needs them any more. It goes a batch per unit of work, and returns how
// many rows and keys it deleted. The app runs it every SWEEP_INTERVAL,
// beside the user domain's sweeps. An expired invitation stays in its
// organization's state, where it can no longer be accepted or revoked.
// It deletes, too, the records of invitations sent longer ago than
// [Policy.InvitationWindow], which no owner's limit counts any more
// ([Views.SweepSent]).
func (s *Service) Sweep(ctx context.Context) (int64, error) {
	return s.commands.Job(ctx, "org.Sweep", s.sweep)
}

func (s *Service) sweep(ctx context.Context) (int64, error) {
	rows, err := s.commands.InBatches(ctx, "org.Sweep rows", func(ctx context.Context, tx uow.Tx) (int64, error) {
		return s.Views.Sweep(ctx, tx, tx.Now().Add(-aggregate.SweepMargin), aggregate.SweepBatch)
	})
	if err != nil {
		return rows, fmt.Errorf("org: sweep: %w", err)
	}
	keys, err := s.commands.InBatches(ctx, "org.Sweep keys", func(ctx context.Context, tx uow.Tx) (int64, error) {
		return s.Keys.ForgetExpired(ctx, tx, invitationPrefix, tx.Now().Add(-aggregate.SweepMargin), aggregate.SweepBatch)
	})
	if err != nil {
		return rows + keys, fmt.Errorf("org: sweep: %w", err)
	}
	sent, err := s.commands.InBatches(ctx, "org.Sweep sent", func(ctx context.Context, tx uow.Tx) (int64, error) {
		return s.Views.SweepSent(ctx, tx, tx.Now().Add(-s.policy.InvitationWindow-aggregate.SweepMargin), aggregate.SweepBatch)
	})
	if err != nil {
		return rows + keys + sent, fmt.Errorf("org: sweep: %w", err)
	}
	return rows + keys + sent, nil
}
