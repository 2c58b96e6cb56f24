package org

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/uow"
)

// TypeInvitationAccepted is the event of an accepted invitation. The
// [MemberAdded] of the account that accepted it follows it.
const TypeInvitationAccepted = "org.invitation_accepted"

// InvitationAccepted records that the account UserID, whose address is
// the invited one, used the invitation's code.
type InvitationAccepted struct {
	InvitationID uuid.UUID `json:"invitation_id"`
	UserID       uuid.UUID `json:"user_id"`
}

// Accept makes the session's account a member of the organization whose
// invitation has the code, with the role it offers, and returns the
// membership. The account's address must be the invited one: with
// another's it returns [ErrWrongAddress], and the code stays usable. It
// returns [ErrInvalidCode] for a code that is unknown, used, expired,
// revoked or voided, [ErrAlreadyMember], [ErrFull], and
// [ErrTooManyOrganizations].
func (s *Service) Accept(ctx context.Context, token, code string) (Membership, error) {
	if !validCode(code) {
		return Membership{}, fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	hash := hashCode(code)
	var m Membership
	err := s.commands.Do(ctx, "org.Accept", func(ctx context.Context, tx uow.Tx) error {
		u, err := s.Users.Authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		row, err := s.invitationOf(ctx, tx, hash)
		if err != nil {
			return err
		}
		o, err := s.load(ctx, tx, row.OrgID)
		if err != nil {
			return err
		}
		n, err := s.Views.CountOrganizationsOf(ctx, tx, u.ID)
		if err != nil {
			return err
		}
		data, err := o.decideAccept(acceptance{
			user: u.ID, invitation: row.ID, codeHash: hash, sameAddress: u.Email == row.Email, orgs: n,
		}, tx.Now())
		if err != nil {
			return err
		}
		role := o.invitations[row.ID].role
		if _, err := s.apply(ctx, tx, o, data...); err != nil {
			return err
		}
		m = Membership{
			Organization: Organization{ID: o.id, Name: o.name, CreatedAt: o.createdAt, Role: role},
			UserID:       u.ID, JoinedAt: tx.Now(),
		}
		return nil
	})
	return m, err
}

// invitationOf returns the pending invitation whose code has hash, from
// the views, or [ErrInvalidCode]. A row that has expired is refused
// here; the organization's stream has the last word
// ([organization.decideAccept]).
func (s *Service) invitationOf(ctx context.Context, tx uow.Tx, hash string) (InvitationRow, error) {
	row, ok, err := s.Views.InvitationByCode(ctx, tx, hash)
	if err != nil {
		return InvitationRow{}, err
	}
	if !ok || !tx.Now().Before(row.ExpiresAt) {
		return InvitationRow{}, fmt.Errorf("%w: no pending invitation of the code", ErrInvalidCode)
	}
	return row, nil
}

// Offer returns what the invitation with the code offers, for the page its
// link opens, and uses nothing up: the organization's ID and name, the
// role, the invited address and the expiry. It needs no session, since
// the code is the secret of whoever holds the mail. It returns
// [ErrInvalidCode] as [Service.Accept] does.
func (s *Service) Offer(ctx context.Context, code string) (InvitationOffer, error) {
	if !validCode(code) {
		return InvitationOffer{}, fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	hash := hashCode(code)
	var offer InvitationOffer
	err := s.commands.Read(ctx, "org.Offer", func(ctx context.Context, tx uow.Tx) error {
		row, err := s.invitationOf(ctx, tx, hash)
		if err != nil {
			return err
		}
		o, ok, err := s.Views.Organization(ctx, tx, row.OrgID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: no pending invitation of the code", ErrInvalidCode)
		}
		offer = InvitationOffer{OrgID: o.ID, OrgName: o.Name, Role: row.Role, Email: row.Email, ExpiresAt: row.ExpiresAt}
		return nil
	})
	return offer, err
}
