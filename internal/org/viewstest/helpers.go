package viewstest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// start is the time the suite's rows begin at: a whole second, so that the
// microsecond the stores keep changes no time the suite compares.
var start = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

// ttl is how long the suite's invitations are valid.
const ttl = 7 * 24 * time.Hour

// suite is a harness with the helpers the cases share.
type suite struct {
	Harness
}

// do runs fn in a unit of work that must commit.
func (s *suite) do(t *testing.T, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := s.Runner.Do(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// read runs fn in a read-only unit of work that must succeed.
func (s *suite) read(t *testing.T, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := s.Runner.Read(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// putUser puts an account with email in the user views, and returns its
// ID.
func (s *suite) putUser(t *testing.T, email string) uuid.UUID {
	t.Helper()
	id := newID(t)
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		return s.Users.PutUser(ctx, tx, user.User{ID: id, Email: email, CreatedAt: start})
	})
	return id
}

// putOrg puts an organization named name, created at, and returns it.
func (s *suite) putOrg(t *testing.T, name string, at time.Time) org.OrganizationRow {
	t.Helper()
	o := org.OrganizationRow{ID: newID(t), Name: name, CreatedAt: at}
	s.do(t, func(ctx context.Context, tx uow.Tx) error { return s.Views.PutOrganization(ctx, tx, o) })
	return o
}

// putMember puts userID in the organization with role, joined at, and
// returns the row.
func (s *suite) putMember(t *testing.T, orgID, userID uuid.UUID, role org.Role, at time.Time) org.MemberRow {
	t.Helper()
	m := org.MemberRow{OrgID: orgID, UserID: userID, Role: role, JoinedAt: at}
	s.do(t, func(ctx context.Context, tx uow.Tx) error { return s.Views.PutMember(ctx, tx, m) })
	return m
}

// invitation returns an invitation to email into the organization, sent at
// by, of a code labelled code; it puts nothing.
func invitation(t *testing.T, orgID uuid.UUID, email, code string, role org.Role, by uuid.UUID, at time.Time) org.InvitationRow {
	t.Helper()
	return org.InvitationRow{
		ID: newID(t), OrgID: orgID, CodeHash: fakeHash(code), Email: email, Role: role,
		InvitedBy: by, SentAt: at, ExpiresAt: at.Add(ttl),
	}
}

// putInvitation puts i and returns it.
func (s *suite) putInvitation(t *testing.T, i org.InvitationRow) org.InvitationRow {
	t.Helper()
	s.do(t, func(ctx context.Context, tx uow.Tx) error { return s.Views.PutInvitation(ctx, tx, i) })
	return i
}

// sweep sweeps up to limit invitations as of now in a committed unit of
// work, and checks how many it deleted.
func (s *suite) sweep(t *testing.T, now time.Time, limit int, want int64) {
	t.Helper()
	var n int64
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		var err error
		n, err = s.Views.Sweep(ctx, tx, now, limit)
		return err
	})
	if n != want {
		t.Errorf("Sweep as of %s, at most %d, deleted %d invitations, want %d", showTime(now), limit, n, want)
	}
}

// keys names what the suite asks the views about.
type keys struct {
	orgs   []uuid.UUID
	users  []uuid.UUID
	codes  []string
	emails []string
}

// answers asks the views about every key in one read-only unit of work and
// returns each answer written out, by query.
func (s *suite) answers(t *testing.T, k keys) map[string]string {
	t.Helper()
	out := map[string]string{}
	s.read(t, func(ctx context.Context, tx uow.Tx) error {
		clear(out)
		for _, id := range k.orgs {
			o, ok, err := s.Views.Organization(ctx, tx, id)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("Organization(%s)", id)] = showOrganization(o, ok)
			members, err := s.Views.Members(ctx, tx, id)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("Members(%s)", id)] = showList(members, showMember)
			invitations, err := s.Views.Invitations(ctx, tx, id)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("Invitations(%s)", id)] = showList(invitations, showInvitation)
		}
		for _, id := range k.users {
			orgs, err := s.Views.OrganizationsOf(ctx, tx, id)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("OrganizationsOf(%s)", id)] = showList(orgs, showMembership)
			n, err := s.Views.CountOrganizationsOf(ctx, tx, id)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("CountOrganizationsOf(%s)", id)] = fmt.Sprint(n)
		}
		for _, code := range k.codes {
			i, ok, err := s.Views.InvitationByCode(ctx, tx, fakeHash(code))
			if err != nil {
				return err
			}
			out[fmt.Sprintf("InvitationByCode(%s)", code)] = showFound(i, ok, showInvitation)
		}
		for _, email := range k.emails {
			list, err := s.Views.InvitationsTo(ctx, tx, email)
			if err != nil {
				return err
			}
			// InvitationsTo promises no order.
			slices.SortFunc(list, func(a, b org.InvitationRow) int { return strings.Compare(a.ID.String(), b.ID.String()) })
			out[fmt.Sprintf("InvitationsTo(%s)", email)] = showList(list, showInvitation)
		}
		return nil
	})
	return out
}

// wantAnswers checks that the answers to k are want, with every query
// that want leaves out answering as in before.
func (s *suite) wantAnswers(t *testing.T, what string, k keys, before, want map[string]string) {
	t.Helper()
	got := s.answers(t, k)
	full := maps.Clone(before)
	for q, a := range want {
		if _, ok := got[q]; !ok {
			t.Fatalf("the suite expects an answer to %s, which it does not ask", q)
		}
		full[q] = a
	}
	for _, d := range diffAnswers(full, got) {
		t.Errorf("%s: %s", what, d)
	}
}

// diffAnswers lists the queries whose answers differ, one line each, in
// the order of the queries.
func diffAnswers(want, got map[string]string) []string {
	var queries []string
	for q := range want {
		queries = append(queries, q)
	}
	for q := range got {
		if _, ok := want[q]; !ok {
			queries = append(queries, q)
		}
	}
	slices.Sort(queries)
	var diff []string
	for _, q := range queries {
		if w, g := want[q], got[q]; w != g {
			diff = append(diff, fmt.Sprintf("%s = %s, want %s", q, g, w))
		}
	}
	return diff
}

// The answers written out. Times show their zone, so that one not in UTC
// differs from the UTC time the suite expects, even where the local zone
// is UTC.

func showTime(t time.Time) string {
	s := t.Format(time.RFC3339Nano)
	if t.Location() != time.UTC {
		s += " (" + t.Location().String() + ")"
	}
	return s
}

func showFound[T any](v T, found bool, show func(T) string) string {
	if !found {
		return "none"
	}
	return show(v)
}

func showList[T any](list []T, show func(T) string) string {
	parts := make([]string, len(list))
	for i, v := range list {
		parts[i] = show(v)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func showOrganization(o org.OrganizationRow, found bool) string {
	return showFound(o, found, func(o org.OrganizationRow) string {
		return fmt.Sprintf("{%s %q %s}", o.ID, o.Name, showTime(o.CreatedAt))
	})
}

func showMembership(o org.Organization) string {
	return fmt.Sprintf("{%s %q %s %s}", o.ID, o.Name, showTime(o.CreatedAt), o.Role)
}

func showMember(m org.Member) string {
	return fmt.Sprintf("{%s %s %s %s}", m.UserID, m.Email, m.Role, showTime(m.JoinedAt))
}

func showInvitation(i org.InvitationRow) string {
	return fmt.Sprintf("{%s org=%s code=%s to=%s %s by=%s sent=%s expires=%s}", i.ID, i.OrgID, i.CodeHash, i.Email, i.Role,
		i.InvitedBy, showTime(i.SentAt), showTime(i.ExpiresAt))
}

// memberOf is how OrganizationsOf shows the membership m in o.
func memberOf(o org.OrganizationRow, role org.Role) org.Organization {
	return org.Organization{ID: o.ID, Name: o.Name, CreatedAt: o.CreatedAt, Role: role}
}

// fakeTx is a [uow.Tx] that no backend made.
type fakeTx struct{}

func (fakeTx) Now() time.Time { return start }

// fakeHash returns a hash of the form the domain stores, of label.
func fakeHash(label string) string {
	sum := sha256.Sum256([]byte("viewstest " + label))
	return hex.EncodeToString(sum[:])
}

func newID(t *testing.T) uuid.UUID {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// orderedIDs returns n new IDs in increasing order.
func orderedIDs(t *testing.T, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = newID(t)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}
