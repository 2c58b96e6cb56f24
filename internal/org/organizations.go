package org

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/uow"
)

// The events that begin and end an organization's stream.
const (
	TypeCreated = "org.created"
	TypeDeleted = "org.deleted"
)

// Created begins an organization's stream: an account created it, named
// Name, and became its first owner, which the [MemberAdded] appended
// with it records. The stream names the organization ([OrgOf]).
type Created struct {
	Name      string    `json:"name"`
	CreatedBy uuid.UUID `json:"created_by"`
}

// The reasons of a [Deleted].
const (
	// DeletedByOwner is an owner's deletion ([Service.Delete]).
	DeletedByOwner = "deleted"
	// DeletedErased is the erasure of the last member's account
	// ([Service.Erased]).
	DeletedErased = "erased"
)

// Deleted ends an organization's stream: its members are no longer
// members, and its pending invitations were voided by the events before
// it. By is the owner who deleted it, zero when the erasure of its last
// member's account did.
type Deleted struct {
	By     uuid.UUID `json:"by,omitzero"`
	Reason string    `json:"reason"`
}

// Create creates an organization named name, whose first owner is the
// session's account. It returns an error wrapping [ErrInvalidName], and
// [ErrTooManyOrganizations] for an account that is a member of
// [MaxOrganizations].
func (s *Service) Create(ctx context.Context, token, name string) (Organization, error) {
	name, err := ValidName(name)
	if err != nil {
		return Organization{}, err
	}
	var o Organization
	err = s.commands.Do(ctx, "org.Create", func(ctx context.Context, tx uow.Tx) error {
		u, err := s.Users.Authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		if err := s.roomFor(ctx, tx, u.ID); err != nil {
			return err
		}
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("org: create: %w", err)
		}
		if _, err := s.apply(ctx, tx, newOrganization(id), decideCreate(u.ID, name)...); err != nil {
			return err
		}
		o = Organization{ID: id, Name: name, CreatedAt: tx.Now(), Role: RoleOwner}
		return nil
	})
	return o, err
}

// roomFor returns [ErrTooManyOrganizations] when the account user is a
// member of [MaxOrganizations] already. The caller holds the account's
// stream ([Authenticator]), so that two commands cannot both take its
// last place.
func (s *Service) roomFor(ctx context.Context, tx uow.Tx, user uuid.UUID) error {
	n, err := s.Views.CountOrganizationsOf(ctx, tx, user)
	if err != nil {
		return err
	}
	if n >= MaxOrganizations {
		return fmt.Errorf("%w: the account is a member of %d", ErrTooManyOrganizations, n)
	}
	return nil
}

// List returns the organizations of the session's account, with its role
// in each, by name. Like every query of the service, it reads the account
// and then the views in read-only units of work, which wait for no
// command.
func (s *Service) List(ctx context.Context, token string) ([]Organization, error) {
	u, err := s.Users.Me(ctx, token)
	if err != nil {
		return nil, err
	}
	var out []Organization
	err = s.commands.Read(ctx, "org.List", func(ctx context.Context, tx uow.Tx) error {
		out, err = s.Views.OrganizationsOf(ctx, tx, u.ID)
		return err
	})
	return out, err
}

// Get returns the organization id with its members, oldest first, to one
// of them. It returns [ErrNotFound] to anyone else.
func (s *Service) Get(ctx context.Context, token string, id uuid.UUID) (Details, error) {
	u, err := s.Users.Me(ctx, token)
	if err != nil {
		return Details{}, err
	}
	var d Details
	err = s.commands.Read(ctx, "org.Get", func(ctx context.Context, tx uow.Tx) error {
		var self Member
		if d.Members, self, err = s.membersAs(ctx, tx, id, u.ID); err != nil {
			return err
		}
		row, ok, err := s.Views.Organization(ctx, tx, id)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: organization %s", ErrNotFound, id)
		}
		d.Organization = Organization{ID: row.ID, Name: row.Name, CreatedAt: row.CreatedAt, Role: self.Role}
		return nil
	})
	return d, err
}

// memberOf returns [ErrNotFound] unless the account user is a member of
// the organization id, as the views say. It reads the account's own
// organizations, at most [MaxOrganizations], and nothing of id's, so
// that it takes as long whether or not an organization id exists: a
// stranger neither learns that from the time of an answer nor makes the
// service read a large organization's stream or members. Every command
// and query that names an organization asks it first; the organization's
// stream has the last word.
func (s *Service) memberOf(ctx context.Context, tx uow.Tx, id, user uuid.UUID) error {
	orgs, err := s.Views.OrganizationsOf(ctx, tx, user)
	if err != nil {
		return err
	}
	for _, o := range orgs {
		if o.ID == id {
			return nil
		}
	}
	return fmt.Errorf("%w: no organization %s of which the account is a member", ErrNotFound, id)
}

// membersAs returns the members of the organization id, from the views,
// and the membership of the account user among them, or [ErrNotFound]
// when it is not one of them ([Service.memberOf]).
func (s *Service) membersAs(ctx context.Context, tx uow.Tx, id, user uuid.UUID) ([]Member, Member, error) {
	if err := s.memberOf(ctx, tx, id, user); err != nil {
		return nil, Member{}, err
	}
	members, err := s.Views.Members(ctx, tx, id)
	if err != nil {
		return nil, Member{}, err
	}
	for _, m := range members {
		if m.UserID == user {
			return members, m, nil
		}
	}
	return nil, Member{}, fmt.Errorf("%w: no organization %s of which the account is a member", ErrNotFound, id)
}

// Delete deletes the organization id on behalf of one of its owners: its
// pending invitations are voided, their keys forgotten, and its members
// are members no more. Its events stay, and hold no address. It returns
// [ErrNotFound] and [ErrNotOwner].
func (s *Service) Delete(ctx context.Context, token string, id uuid.UUID) error {
	return s.decideAs(ctx, "org.Delete", token, id, func(o organization, by uuid.UUID, _ time.Time) ([]any, error) {
		return o.decideDelete(by)
	})
}
