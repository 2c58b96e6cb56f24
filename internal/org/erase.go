package org

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// Erased takes the account u, which is being erased, out of the domain,
// in tx, the erasure's unit of work; the app passes it to
// user.WithErasure, which runs it after the erasure has locked the
// account's stream, so that no command of this service adds the account
// to an organization meanwhile ([Service]). In each organization, in the
// order of their IDs so that two erasures take their streams in one
// order:
//
//   - The invitations to u's address that are still open, expired or
//     not, are voided (reason "erased"), and their keys forgotten, which
//     erases the address from the log; the user's erasure deletes their
//     mail with every other mail to the address.
//   - u leaves every organization it is in (reason "erased"), and the
//     invitations it sent that are still pending are voided (reason
//     "inviter_not_owner"), their keys forgotten and their mail deleted.
//     Where it was the last owner, the longest-standing other member
//     becomes owner first ([RoleChanged] by nobody); where it was the
//     last member, the organization is deleted (reason "erased"), its
//     other invitations voided.
//
// An append that loses a race fails tx with ErrConcurrency, and the
// erasure is tried again as a whole.
func (s *Service) Erased(ctx context.Context, tx uow.Tx, u user.User) error {
	orgs, err := s.Views.OrganizationsOf(ctx, tx, u.ID)
	if err != nil {
		return fmt.Errorf("org: erase: %w", err)
	}
	invited := map[uuid.UUID][]uuid.UUID{}
	ids := make([]uuid.UUID, 0, len(orgs))
	for _, o := range orgs {
		ids = append(ids, o.ID)
	}
	if u.Email != "" {
		rows, err := s.Views.InvitationsTo(ctx, tx, u.Email)
		if err != nil {
			return fmt.Errorf("org: erase: %w", err)
		}
		for _, r := range rows {
			if _, ok := invited[r.OrgID]; !ok && !slices.Contains(ids, r.OrgID) {
				ids = append(ids, r.OrgID)
			}
			invited[r.OrgID] = append(invited[r.OrgID], r.ID)
		}
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	for _, id := range ids {
		o, err := s.load(ctx, tx, id)
		if err != nil {
			return fmt.Errorf("org: erase: %w", err)
		}
		if _, err := s.apply(ctx, tx, o, o.decideErase(u.ID, invited[id], tx.Now())...); err != nil {
			return fmt.Errorf("org: erase: %w", err)
		}
	}
	return nil
}
