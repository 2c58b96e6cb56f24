package org_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/uow"
)

// loadCounter is an event store that counts the loads of organizations'
// streams.
type loadCounter struct {
	eventstore.Store
	loads atomic.Int64
}

func (l *loadCounter) Load(ctx context.Context, tx uow.Tx, stream string, from int64) ([]eventstore.Event, error) {
	if strings.HasPrefix(stream, org.CategoryOrg+"-") {
		l.loads.Add(1)
	}
	return l.Store.Load(ctx, tx, stream, from)
}

// A stranger's command or query on an organization is refused as one on
// no organization is, with ErrNotFound and before the organization's
// stream or members are read: it takes as long whether or not the
// organization exists, so its time tells a stranger nothing, and a
// stranger cannot make the service read a large organization.
func TestStrangersReadNothingOfAnOrganization(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, eve := b.signIn(t, "ada@example.com"), b.signIn(t, "eve@example.com")
		o := b.create(t, ada.Token, "Engines")
		b.invite(t, ada.Token, o.ID, "bob@example.com", org.RoleMember)
		loads := &loadCounter{Store: b.Events()}
		svc := b.newService(t, org.Policy{}, loads, b.OrgViews())
		for _, id := range []uuid.UUID{o.ID, uuid.New()} {
			for name, call := range map[string]func() error{
				"Get":          func() error { _, err := svc.Get(ctx, eve.Token, id); return err },
				"Invitations":  func() error { _, err := svc.Invitations(ctx, eve.Token, id); return err },
				"Invite":       func() error { return svc.Invite(ctx, eve.Token, id, "cy@example.com", org.RoleMember) },
				"Revoke":       func() error { return svc.Revoke(ctx, eve.Token, id, uuid.New()) },
				"ChangeRole":   func() error { _, err := svc.ChangeRole(ctx, eve.Token, id, ada.User.ID, org.RoleMember); return err },
				"RemoveMember": func() error { return svc.RemoveMember(ctx, eve.Token, id, ada.User.ID) },
				"Delete":       func() error { return svc.Delete(ctx, eve.Token, id) },
			} {
				wantErr(t, name+" by a stranger", call(), org.ErrNotFound)
			}
		}
		if n := loads.loads.Load(); n != 0 {
			t.Errorf("a stranger's commands loaded organizations' streams %d times, want none", n)
		}
		if got := b.roles(t, ada.Token, o.ID); got != "ada@example.com:owner" {
			t.Errorf("the members after the strangers' commands: %s", got)
		}
	})
}
