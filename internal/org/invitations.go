package org

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// The events of an organization's invitations, but their acceptance
// (accept.go).
const (
	TypeInvitationSent    = "org.invitation_sent"
	TypeInvitationRevoked = "org.invitation_revoked"
	TypeInvitationVoided  = "org.invitation_voided"
)

// InvitationSent records an invitation mailed to an address, with a
// one-time code that makes its account a member with Role, until
// ExpiresAt. Email is sealed for the invitation alone
// ("invitation-ID", personal.go); only the code's hash is kept.
type InvitationSent struct {
	InvitationID uuid.UUID `json:"invitation_id"`
	Email        string    `json:"email"`
	Role         Role      `json:"role"`
	CodeHash     string    `json:"code_hash"`
	ExpiresAt    time.Time `json:"expires_at"`
	InvitedBy    uuid.UUID `json:"invited_by"`
}

// InvitationRevoked records that the owner By revoked a pending
// invitation: its code no longer works.
type InvitationRevoked struct {
	InvitationID uuid.UUID `json:"invitation_id"`
	By           uuid.UUID `json:"by"`
}

// The reasons of an [InvitationVoided].
const (
	// VoidedErased is the erasure of the invited address's account.
	VoidedErased = "erased"
	// VoidedReplaced is a newer invitation to the same address.
	VoidedReplaced = "replaced"
	// VoidedDeleted is the deletion of the organization.
	VoidedDeleted = "deleted"
	// VoidedInviterNotOwner is the end of the inviter's ownership: the
	// owner who sent the invitation was demoted, removed, left, or was
	// taken out by the erasure of its account.
	VoidedInviterNotOwner = "inviter_not_owner"
)

// InvitationVoided records that a pending invitation no longer works, for
// Reason, though nobody revoked it.
type InvitationVoided struct {
	InvitationID uuid.UUID `json:"invitation_id"`
	Reason       string    `json:"reason"`
}

// Invite mails an invitation into the organization id to an address, on
// behalf of one of its owners, with a code that makes the address's
// account a member with the role, for [Policy.InvitationTTL]. It answers
// the same whether or not the address has an account. An invitation
// pending to the same address is voided: the newer one replaces it. It
// returns the error of user.NormalizeEmail for an invalid address, an
// error wrapping [ErrInvalidRole], [ErrNotFound], [ErrNotOwner],
// [ErrAlreadyMember] for an address whose account is a member, and a
// [*TooManyInvitationsError] for an organization that sent
// [Policy.InvitationLimit] within [Policy.InvitationWindow], or an owner
// that sent [Policy.InvitationAccountLimit] within it in all its
// organizations, deleted ones included. The owner's count is read from
// the views without holding anything, so that invitations an owner sends
// at the same moment into several organizations may pass it by as many;
// the organization's own limit is exact, kept in its stream.
//
// When the address has an account, the command holds that account's
// stream, as the account's erasure does, so that the invitation is sent
// either before the erasure, which then voids it, or after it, to an
// address that has no account any more. It holds no other account's
// stream: the owner's session is read before, in a unit of work of its
// own ([Authenticator.Me]). An invitation adds nothing to the owner's
// account, and the owner's erasure appends to the organization's stream,
// which orders the two; whereas holding the owner's stream and then the
// invited account's would deadlock two owners inviting each other's
// addresses at once. So a session that ends between the two reads
// (a sign-out) still sends the invitation it was asked for, as if it
// had been sent a moment before; an owner erased in between is no
// member any more, and Invite returns [ErrNotFound] or [ErrNotOwner].
func (s *Service) Invite(ctx context.Context, token string, id uuid.UUID, address string, role Role) error {
	email, err := user.NormalizeEmail(address)
	if err != nil {
		return err
	}
	if role, err = ParseRole(string(role)); err != nil {
		return err
	}
	u, err := s.Users.Me(ctx, token)
	if err != nil {
		return err
	}
	return s.commands.Do(ctx, "org.Invite", func(ctx context.Context, tx uow.Tx) error {
		if err := s.memberOf(ctx, tx, id, u.ID); err != nil {
			return err
		}
		o, err := s.load(ctx, tx, id)
		if err != nil {
			return err
		}
		// An owner alone learns whether the address's account is a
		// member.
		if err := o.ownerOf(u.ID); err != nil {
			return err
		}
		member, err := s.isMember(ctx, tx, o, email)
		if err != nil {
			return err
		}
		earlier, err := s.Views.InvitationsTo(ctx, tx, email)
		if err != nil {
			return err
		}
		sent, err := s.Views.SentBy(ctx, tx, u.ID, tx.Now().Add(-s.policy.InvitationWindow))
		if err != nil {
			return err
		}
		in := invite{role: role, expiresAt: tx.Now().Add(s.policy.InvitationTTL), member: member, sentByOwner: sent}
		for _, r := range earlier {
			if r.OrgID == id {
				in.earlier = append(in.earlier, r.ID)
			}
		}
		if in.id, err = uuid.NewV7(); err != nil {
			return fmt.Errorf("org: invite: %w", err)
		}
		var code string
		code, in.codeHash = newCode()
		if in.email, err = s.Keys.SealUntil(ctx, tx, invitationSubject(in.id), email, in.expiresAt); err != nil {
			return err
		}
		data, err := o.decideInvite(u.ID, in, tx.Now(), s.policy)
		if err != nil {
			return err
		}
		if _, err := s.apply(ctx, tx, o, data...); err != nil {
			return err
		}
		m, err := outbox.NewMessage(mail.TopicOrgInvitation, mail.Link{
			To: email, URL: s.baseURL + "/invitations?code=" + code, Code: code, ExpiresAt: in.expiresAt,
			Organization: o.name,
		}, tx.Now())
		if err != nil {
			return err
		}
		// The mail's ID is the invitation's, so that the unit of work
		// that ends the invitation deletes it if it is still there.
		m.ID = in.id
		return s.Outbox.Add(ctx, tx, m)
	})
}

// isMember reports whether the account of email, if it has one, is a
// member of o. It holds that account's stream until tx ends, and reads
// the account again once it holds it: an erasure that committed
// meanwhile has left the address without an account.
//
// It does the same work whether or not the address has an account, so
// that an owner, which any account can become by creating an
// organization, cannot tell from an invitation's time whether an address
// has an account: without one, it holds a stream no one else holds.
func (s *Service) isMember(ctx context.Context, tx uow.Tx, o organization, email string) (bool, error) {
	invitee, ok, err := s.UserViews.UserByEmail(ctx, tx, email)
	if err != nil {
		return false, err
	}
	held := invitee.ID
	if !ok {
		if held, err = uuid.NewRandom(); err != nil {
			return false, fmt.Errorf("org: invite: %w", err)
		}
	}
	// An account made for the address meanwhile is held too, and read
	// again: it may have been erased before it was held.
	for {
		if err := s.Events.Lock(ctx, tx, accountStream(held)); err != nil {
			return false, err
		}
		if invitee, ok, err = s.UserViews.UserByEmail(ctx, tx, email); err != nil || !ok {
			return false, err
		}
		if invitee.ID == held {
			_, member := o.members[invitee.ID]
			return member, nil
		}
		held = invitee.ID
	}
}

// accountStream returns the name of the stream of the account id, as the
// user domain names it.
func accountStream(id uuid.UUID) string { return user.CategoryUser + "-" + id.String() }

// Invitations returns the pending invitations of the organization id, to
// one of its owners, oldest first. It returns [ErrNotFound] and
// [ErrNotOwner].
func (s *Service) Invitations(ctx context.Context, token string, id uuid.UUID) ([]Invitation, error) {
	u, err := s.Users.Me(ctx, token)
	if err != nil {
		return nil, err
	}
	var out []Invitation
	err = s.commands.Read(ctx, "org.Invitations", func(ctx context.Context, tx uow.Tx) error {
		_, self, err := s.membersAs(ctx, tx, id, u.ID)
		if err != nil {
			return err
		}
		if self.Role != RoleOwner {
			return fmt.Errorf("%w: the account is a member of %s, not an owner", ErrNotOwner, id)
		}
		rows, err := s.Views.Invitations(ctx, tx, id)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if tx.Now().Before(r.ExpiresAt) {
				out = append(out, Invitation{
					ID: r.ID, Email: r.Email, Role: r.Role, InvitedBy: r.InvitedBy, SentAt: r.SentAt, ExpiresAt: r.ExpiresAt,
				})
			}
		}
		return nil
	})
	return out, err
}

// Revoke revokes the pending invitation of the organization id, on
// behalf of one of its owners: its code no longer works, its key is
// forgotten, and its mail deleted if it is still in the outbox. It
// returns [ErrNotFound] (for an invitation that is not pending too) and
// [ErrNotOwner].
func (s *Service) Revoke(ctx context.Context, token string, id, invitation uuid.UUID) error {
	return s.decideAs(ctx, "org.Revoke", token, id, func(o organization, by uuid.UUID, now time.Time) ([]any, error) {
		return o.decideRevoke(by, invitation, now)
	})
}
