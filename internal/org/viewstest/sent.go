package viewstest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/uow"
)

// The records of sent invitations answer, per account and oldest first,
// the times after a moment, in UTC; they outlive their invitations and
// organizations, go by SweepSent up to its limit, and by Reset.
func testSent(t *testing.T, s *suite) {
	acme := s.putOrg(t, "Acme", start)
	ada, bob := newID(t), newID(t)
	inv := s.putInvitation(t, invitation(t, acme.ID, "x@example.com", "code", org.RoleMember, ada, start))
	inParis := start.Add(2*time.Minute + 7*time.Microsecond).In(time.FixedZone("Paris", 3600))
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		for _, r := range []struct {
			id, by uuid.UUID
			at     time.Time
		}{
			{inv.ID, ada, start}, {newID(t), ada, inParis}, {newID(t), ada, start.Add(time.Minute)},
			{newID(t), bob, start.Add(time.Minute)},
		} {
			if err := s.Views.PutSent(ctx, tx, r.id, r.by, r.at); err != nil {
				return err
			}
		}
		return nil
	})
	sentBy := func(what string, user uuid.UUID, since time.Time, want ...time.Time) {
		t.Helper()
		var got []time.Time
		s.read(t, func(ctx context.Context, tx uow.Tx) error {
			var err error
			got, err = s.Views.SentBy(ctx, tx, user, since)
			return err
		})
		if !slices.EqualFunc(got, want, func(a, b time.Time) bool { return a.Equal(b) && a.Location() == time.UTC }) {
			t.Errorf("%s: SentBy = %v, want %v in UTC", what, got, want)
		}
	}
	all := []time.Time{start, start.Add(time.Minute), inParis.UTC()}
	sentBy("Ada's", ada, start.Add(-time.Second), all...)
	sentBy("Ada's after the first", ada, start, all[1:]...)
	sentBy("Bob's", bob, start.Add(-time.Second), start.Add(time.Minute))
	sentBy("nobody's", newID(t), start.Add(-time.Second))

	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		if err := s.Views.DeleteInvitation(ctx, tx, inv.ID); err != nil {
			return err
		}
		return s.Views.DeleteOrganization(ctx, tx, acme.ID)
	})
	sentBy("Ada's once the invitation and its organization are gone", ada, start.Add(-time.Second), all...)

	sweep := func(before time.Time, limit int, want int64) {
		t.Helper()
		s.do(t, func(ctx context.Context, tx uow.Tx) error {
			n, err := s.Views.SweepSent(ctx, tx, before, limit)
			if err == nil && n != want {
				t.Errorf("SweepSent(%s, %d) = %d, want %d", before, limit, n, want)
			}
			return err
		})
	}
	sweep(start.Add(time.Minute), 2, 2)
	sweep(start.Add(time.Minute), 2, 1)
	sentBy("Ada's after the sweep", ada, start.Add(-time.Second), inParis.UTC())
	sentBy("Bob's after the sweep", bob, start.Add(-time.Second))

	s.do(t, func(ctx context.Context, tx uow.Tx) error { return s.Views.Reset(ctx, tx) })
	sentBy("Ada's after Reset", ada, start.Add(-time.Second))
}
