package viewstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// Harness is what the suite needs of a backend: fresh, empty views per
// call.
type Harness struct {
	// Runner runs the units of work of the suite; the views accept its
	// transactions.
	Runner uow.Runner
	// Views are the views under test.
	Views org.Views
	// Users are the user views of the same database, which hold the
	// addresses [org.Views.Members] shows.
	Users user.Views
}

// Run runs the suite. Each case is a parallel subtest that calls setup for
// views of its own.
func Run(t *testing.T, setup func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			if h.Runner == nil || h.Views == nil || h.Users == nil {
				t.Fatalf("setup returned an incomplete harness: %+v", h)
			}
			c.run(t, &suite{Harness: h})
		})
	}
}

// cases lists the suite; each name is "Method/Behaviour".
var cases = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"Organization/PutAndGet", testOrganization},
	{"OrganizationsOf/ByNameThenID", testOrganizationsOf},
	{"Members/ByJoinThenID", testMembers},
	{"SetRole/OneMembership", testSetRole},
	{"DeleteMember/OneMembership", testDeleteMember},
	{"Invitations/ByOrganizationCodeAndAddress", testInvitations},
	{"DeleteInvitation/OnlyThatOne", testDeleteInvitation},
	{"DeleteOrganization/OnlyItsOwn", testDeleteOrganization},
	{"Sweep/ExpiredUpToLimit", testSweep},
	{"Sent/OutlivesItsOrganization", testSent},
	{"Put/ExistingKeyFails", testPutExistingKey},
	{"Reset/EmptiesEveryView", testReset},
	{"ReadOnly/RefusesWrites", testReadOnly},
	{"ForeignTx/Refused", testForeignTx},
}

// Organization answers what was put, in UTC, and nothing for an unknown
// ID.
func testOrganization(t *testing.T, s *suite) {
	acme := s.putOrg(t, "Acme", start)
	// A time in another zone comes back as the same instant, in UTC.
	inParis := start.Add(time.Hour + 7*time.Microsecond).In(time.FixedZone("Paris", 3600))
	other := s.putOrg(t, "Ünïcode 組織 😀", inParis)
	unknown := newID(t)
	got := s.answers(t, keys{orgs: []uuid.UUID{acme.ID, other.ID, unknown}})
	want := map[string]string{
		"Organization(" + acme.ID.String() + ")": showOrganization(acme, true),
		"Organization(" + other.ID.String() + ")": showOrganization(org.OrganizationRow{
			ID: other.ID, Name: other.Name, CreatedAt: start.Add(time.Hour + 7*time.Microsecond),
		}, true),
		"Organization(" + unknown.String() + ")": "none",
	}
	for q, w := range want {
		if got[q] != w {
			t.Errorf("%s = %s, want %s", q, got[q], w)
		}
	}
}

// OrganizationsOf lists an account's organizations with its role in
// each, by name in code point order and then by ID, and no other's;
// CountOrganizationsOf counts them. A membership of an organization that
// is not there is neither.
func testOrganizationsOf(t *testing.T, s *suite) {
	ada, bob, nobody := newID(t), newID(t), newID(t)
	same := orderedIDs(t, 2)
	orgs := map[string]org.OrganizationRow{}
	// Put in an order that is none of the orders the list could take.
	for i, o := range []struct {
		key, name string
		id        uuid.UUID
	}{
		{"beta", "beta", newID(t)},
		{"same2", "Same", same[1]},
		{"Alpha", "Alpha", newID(t)},
		{"Äpfel", "Äpfel", newID(t)},
		{"same1", "Same", same[0]},
		{"Zeta", "Zeta", newID(t)},
		{"alpha", "alpha", newID(t)},
		{"Omega", "Omega", newID(t)},
	} {
		r := org.OrganizationRow{ID: o.id, Name: o.name, CreatedAt: start.Add(time.Duration(i) * time.Minute)}
		s.do(t, func(ctx context.Context, tx uow.Tx) error { return s.Views.PutOrganization(ctx, tx, r) })
		orgs[o.key] = r
	}
	roles := map[string]org.Role{
		"beta": org.RoleOwner, "same2": org.RoleMember, "Alpha": org.RoleMember, "Äpfel": org.RoleOwner,
		"same1": org.RoleOwner, "Zeta": org.RoleMember, "alpha": org.RoleOwner,
	}
	for key, role := range roles {
		s.putMember(t, orgs[key].ID, ada, role, start)
	}
	s.putMember(t, orgs["beta"].ID, bob, org.RoleMember, start)
	s.putMember(t, orgs["Omega"].ID, bob, org.RoleOwner, start)
	// A membership of an organization the views do not hold is neither
	// listed nor counted.
	s.putMember(t, newID(t), bob, org.RoleOwner, start)

	var wantAda []org.Organization
	for _, key := range []string{"Alpha", "same1", "same2", "Zeta", "alpha", "beta", "Äpfel"} {
		wantAda = append(wantAda, memberOf(orgs[key], roles[key]))
	}
	wantBob := []org.Organization{memberOf(orgs["Omega"], org.RoleOwner), memberOf(orgs["beta"], org.RoleMember)}
	got := s.answers(t, keys{users: []uuid.UUID{ada, bob, nobody}})
	for q, w := range map[string]string{
		"OrganizationsOf(" + ada.String() + ")":         showList(wantAda, showMembership),
		"CountOrganizationsOf(" + ada.String() + ")":    "7",
		"OrganizationsOf(" + bob.String() + ")":         showList(wantBob, showMembership),
		"CountOrganizationsOf(" + bob.String() + ")":    "2",
		"OrganizationsOf(" + nobody.String() + ")":      "[]",
		"CountOrganizationsOf(" + nobody.String() + ")": "0",
	} {
		if got[q] != w {
			t.Errorf("%s =\n  %s\nwant\n  %s", q, got[q], w)
		}
	}
}

// Members lists an organization's members by when they joined and then
// by ID, each with its account's address now, leaving out a member whose
// account the user views do not hold, and no member of another.
func testMembers(t *testing.T, s *suite) {
	acme, globex := s.putOrg(t, "Acme", start), s.putOrg(t, "Globex", start)
	ada := s.putUser(t, "ada@example.com")
	early, late := s.putUser(t, "early@example.com"), s.putUser(t, "late@example.com")
	if early.String() > late.String() {
		early, late = late, early
	}
	ghost := newID(t)
	// Put in an order that is none of the orders the list could take.
	s.putMember(t, acme.ID, late, org.RoleMember, start.Add(time.Hour))
	s.putMember(t, acme.ID, ghost, org.RoleMember, start.Add(30*time.Minute))
	s.putMember(t, acme.ID, early, org.RoleOwner, start.Add(time.Hour))
	s.putMember(t, acme.ID, ada, org.RoleOwner, start)
	s.putMember(t, globex.ID, late, org.RoleOwner, start)

	unknown := newID(t)
	k := keys{orgs: []uuid.UUID{acme.ID, globex.ID, unknown}}
	before := s.answers(t, k)
	wantAcme := []org.Member{
		{UserID: ada, Email: "ada@example.com", Role: org.RoleOwner, JoinedAt: start},
		{UserID: early, Email: "early@example.com", Role: org.RoleOwner, JoinedAt: start.Add(time.Hour)},
		{UserID: late, Email: "late@example.com", Role: org.RoleMember, JoinedAt: start.Add(time.Hour)},
	}
	wantGlobex := []org.Member{{UserID: late, Email: "late@example.com", Role: org.RoleOwner, JoinedAt: start}}
	for q, w := range map[string]string{
		"Members(" + acme.ID.String() + ")":   showList(wantAcme, showMember),
		"Members(" + globex.ID.String() + ")": showList(wantGlobex, showMember),
		"Members(" + unknown.String() + ")":   "[]",
	} {
		if before[q] != w {
			t.Errorf("%s =\n  %s\nwant\n  %s", q, before[q], w)
		}
	}

	// The address shown is the account's now.
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		return s.Users.SetEmail(ctx, tx, late, "later@example.com")
	})
	wantAcme[2].Email, wantGlobex[0].Email = "later@example.com", "later@example.com"
	s.wantAnswers(t, "after the address changed", k, before, map[string]string{
		"Members(" + acme.ID.String() + ")":   showList(wantAcme, showMember),
		"Members(" + globex.ID.String() + ")": showList(wantGlobex, showMember),
	})
}

// SetRole sets the role of one membership: not the account's in another
// organization, nor another member's. Of a membership that is not there
// it changes nothing.
func testSetRole(t *testing.T, s *suite) {
	acme, globex := s.putOrg(t, "Acme", start), s.putOrg(t, "Globex", start)
	ada, bob := s.putUser(t, "ada@example.com"), s.putUser(t, "bob@example.com")
	adaAcme := s.putMember(t, acme.ID, ada, org.RoleMember, start)
	bobAcme := s.putMember(t, acme.ID, bob, org.RoleOwner, start.Add(time.Minute))
	adaGlobex := s.putMember(t, globex.ID, ada, org.RoleMember, start)
	k := keys{orgs: []uuid.UUID{acme.ID, globex.ID}, users: []uuid.UUID{ada, bob}}
	before := s.answers(t, k)

	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		return s.Views.SetRole(ctx, tx, acme.ID, ada, org.RoleOwner)
	})
	adaAcme.Role = org.RoleOwner
	promoted := map[string]string{
		"Members(" + acme.ID.String() + ")": showList([]org.Member{
			member(adaAcme, "ada@example.com"), member(bobAcme, "bob@example.com"),
		}, showMember),
		"OrganizationsOf(" + ada.String() + ")": showList([]org.Organization{
			memberOf(acme, org.RoleOwner), memberOf(globex, adaGlobex.Role),
		}, showMembership),
	}
	s.wantAnswers(t, "after SetRole", k, before, promoted)

	after := s.answers(t, k)
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		if err := s.Views.SetRole(ctx, tx, acme.ID, newID(t), org.RoleOwner); err != nil {
			return fmt.Errorf("SetRole of no member: %w", err)
		}
		return s.Views.SetRole(ctx, tx, newID(t), ada, org.RoleMember)
	})
	s.wantAnswers(t, "after SetRole of memberships that are not there", k, after, nil)
}

// DeleteMember deletes one membership: not the account's in another
// organization, nor another member's. Of a membership that is not there
// it changes nothing; the account may then join again.
func testDeleteMember(t *testing.T, s *suite) {
	acme, globex := s.putOrg(t, "Acme", start), s.putOrg(t, "Globex", start.Add(time.Second))
	ada, bob := s.putUser(t, "ada@example.com"), s.putUser(t, "bob@example.com")
	s.putMember(t, acme.ID, ada, org.RoleMember, start)
	bobAcme := s.putMember(t, acme.ID, bob, org.RoleOwner, start.Add(time.Minute))
	adaGlobex := s.putMember(t, globex.ID, ada, org.RoleOwner, start)
	k := keys{orgs: []uuid.UUID{acme.ID, globex.ID}, users: []uuid.UUID{ada, bob}}
	before := s.answers(t, k)

	s.do(t, func(ctx context.Context, tx uow.Tx) error { return s.Views.DeleteMember(ctx, tx, acme.ID, ada) })
	left := map[string]string{
		"Members(" + acme.ID.String() + ")":          showList([]org.Member{member(bobAcme, "bob@example.com")}, showMember),
		"OrganizationsOf(" + ada.String() + ")":      showList([]org.Organization{memberOf(globex, adaGlobex.Role)}, showMembership),
		"CountOrganizationsOf(" + ada.String() + ")": "1",
	}
	s.wantAnswers(t, "after DeleteMember", k, before, left)

	after := s.answers(t, k)
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		if err := s.Views.DeleteMember(ctx, tx, acme.ID, ada); err != nil {
			return fmt.Errorf("DeleteMember again: %w", err)
		}
		return s.Views.DeleteMember(ctx, tx, newID(t), bob)
	})
	s.wantAnswers(t, "after DeleteMember of memberships that are not there", k, after, nil)

	back := s.putMember(t, acme.ID, ada, org.RoleMember, start.Add(time.Hour))
	s.wantAnswers(t, "after joining again", k, before, map[string]string{
		"Members(" + acme.ID.String() + ")": showList([]org.Member{
			member(bobAcme, "bob@example.com"), member(back, "ada@example.com"),
		}, showMember),
	})
}

// Invitations lists an organization's invitations by when they were sent
// and then by ID; InvitationByCode finds one by its code's hash, and
// InvitationsTo every one to an address, in any organization.
func testInvitations(t *testing.T, s *suite) {
	acme, globex := s.putOrg(t, "Acme", start), s.putOrg(t, "Globex", start)
	ada, bob := newID(t), newID(t)
	tie := orderedIDs(t, 2)
	first := invitation(t, acme.ID, "y@example.com", "first", org.RoleOwner, bob, start)
	first.ExpiresAt = start.Add(time.Minute)
	tieLow := invitation(t, acme.ID, "z@example.com", "tie low", org.RoleMember, ada, start.Add(time.Hour))
	tieLow.ID = tie[0]
	tieHigh := invitation(t, acme.ID, "w@example.com", "tie high", org.RoleOwner, ada, start.Add(time.Hour))
	tieHigh.ID = tie[1]
	last := invitation(t, acme.ID, "x@example.com", "last", org.RoleMember, ada, start.Add(2*time.Hour))
	elsewhere := invitation(t, globex.ID, "x@example.com", "elsewhere", org.RoleMember, bob, start.Add(90*time.Minute))
	// In another zone, it comes back in UTC.
	zoned := elsewhere
	zoned.SentAt = elsewhere.SentAt.In(time.FixedZone("Tokyo", 9*3600))
	zoned.ExpiresAt = elsewhere.ExpiresAt.In(time.FixedZone("Tokyo", 9*3600))
	// Put in an order that is none of the orders the list could take.
	for _, i := range []org.InvitationRow{last, tieHigh, zoned, first, tieLow} {
		s.putInvitation(t, i)
	}

	unknownOrg := newID(t)
	got := s.answers(t, keys{
		orgs:   []uuid.UUID{acme.ID, globex.ID, unknownOrg},
		codes:  []string{"first", "tie low", "tie high", "last", "elsewhere", "unknown"},
		emails: []string{"x@example.com", "y@example.com", "nobody@example.com"},
	})
	byID := func(list ...org.InvitationRow) string { return showList(list, showInvitation) }
	for q, w := range map[string]string{
		"Invitations(" + acme.ID.String() + ")":    byID(first, tieLow, tieHigh, last),
		"Invitations(" + globex.ID.String() + ")":  byID(elsewhere),
		"Invitations(" + unknownOrg.String() + ")": "[]",
		"InvitationByCode(first)":                  showInvitation(first),
		"InvitationByCode(tie low)":                showInvitation(tieLow),
		"InvitationByCode(tie high)":               showInvitation(tieHigh),
		"InvitationByCode(last)":                   showInvitation(last),
		"InvitationByCode(elsewhere)":              showInvitation(elsewhere),
		"InvitationByCode(unknown)":                "none",
		"InvitationsTo(x@example.com)":             byID(sortedByID(last, elsewhere)...),
		"InvitationsTo(y@example.com)":             byID(first),
		"InvitationsTo(nobody@example.com)":        "[]",
	} {
		if got[q] != w {
			t.Errorf("%s =\n  %s\nwant\n  %s", q, got[q], w)
		}
	}
}

// DeleteInvitation deletes one invitation, by its ID, and no other to the
// same address; of one that is not there it changes nothing.
func testDeleteInvitation(t *testing.T, s *suite) {
	acme, globex := s.putOrg(t, "Acme", start), s.putOrg(t, "Globex", start)
	by := newID(t)
	gone := s.putInvitation(t, invitation(t, acme.ID, "x@example.com", "gone", org.RoleMember, by, start))
	kept := s.putInvitation(t, invitation(t, acme.ID, "y@example.com", "kept", org.RoleMember, by, start.Add(time.Minute)))
	elsewhere := s.putInvitation(t, invitation(t, globex.ID, "x@example.com", "elsewhere", org.RoleOwner, by, start))
	k := keys{
		orgs:   []uuid.UUID{acme.ID, globex.ID},
		codes:  []string{"gone", "kept", "elsewhere"},
		emails: []string{"x@example.com", "y@example.com"},
	}
	before := s.answers(t, k)

	s.do(t, func(ctx context.Context, tx uow.Tx) error { return s.Views.DeleteInvitation(ctx, tx, gone.ID) })
	deleted := map[string]string{
		"Invitations(" + acme.ID.String() + ")": showList([]org.InvitationRow{kept}, showInvitation),
		"InvitationByCode(gone)":                "none",
		"InvitationsTo(x@example.com)":          showList([]org.InvitationRow{elsewhere}, showInvitation),
	}
	s.wantAnswers(t, "after DeleteInvitation", k, before, deleted)

	after := s.answers(t, k)
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		if err := s.Views.DeleteInvitation(ctx, tx, gone.ID); err != nil {
			return fmt.Errorf("DeleteInvitation again: %w", err)
		}
		return s.Views.DeleteInvitation(ctx, tx, newID(t))
	})
	s.wantAnswers(t, "after DeleteInvitation of invitations that are not there", k, after, nil)
}

// world is a few organizations with members and invitations.
type world struct {
	acme, globex        org.OrganizationRow
	ada, bob, cy        uuid.UUID
	acmeX, acmeY        org.InvitationRow
	globexX             org.InvitationRow
	adaAcme, bobAcme    org.MemberRow
	adaGlobex, cyGlobex org.MemberRow
}

// keys names everything of w.
func (w world) keys() keys {
	return keys{
		orgs:   []uuid.UUID{w.acme.ID, w.globex.ID},
		users:  []uuid.UUID{w.ada, w.bob, w.cy},
		codes:  []string{"acme x", "acme y", "globex x"},
		emails: []string{"x@example.com", "y@example.com"},
	}
}

// newWorld puts Acme, with Ada and Bob and invitations to x and y, and
// Globex, with Ada and Cy and an invitation to x.
func (s *suite) newWorld(t *testing.T) world {
	t.Helper()
	var w world
	w.acme, w.globex = s.putOrg(t, "Acme", start), s.putOrg(t, "Globex", start.Add(time.Minute))
	w.ada, w.bob, w.cy = s.putUser(t, "ada@example.com"), s.putUser(t, "bob@example.com"), s.putUser(t, "cy@example.com")
	w.adaAcme = s.putMember(t, w.acme.ID, w.ada, org.RoleOwner, start)
	w.bobAcme = s.putMember(t, w.acme.ID, w.bob, org.RoleMember, start.Add(time.Hour))
	w.adaGlobex = s.putMember(t, w.globex.ID, w.ada, org.RoleMember, start.Add(2*time.Hour))
	w.cyGlobex = s.putMember(t, w.globex.ID, w.cy, org.RoleOwner, start.Add(time.Minute))
	w.acmeX = s.putInvitation(t, invitation(t, w.acme.ID, "x@example.com", "acme x", org.RoleMember, w.ada, start.Add(3*time.Hour)))
	w.acmeY = s.putInvitation(t, invitation(t, w.acme.ID, "y@example.com", "acme y", org.RoleOwner, w.ada, start.Add(4*time.Hour)))
	w.globexX = s.putInvitation(t, invitation(t, w.globex.ID, "x@example.com", "globex x", org.RoleMember, w.cy, start.Add(5*time.Hour)))
	return w
}

// DeleteOrganization deletes the organization, its members and its
// invitations, and nothing of another organization, even of the same
// members or to the same addresses; one put again under its ID has no
// members or invitations. Of one that is not there it changes nothing.
func testDeleteOrganization(t *testing.T, s *suite) {
	w := s.newWorld(t)
	k := w.keys()
	before := s.answers(t, k)

	s.do(t, func(ctx context.Context, tx uow.Tx) error { return s.Views.DeleteOrganization(ctx, tx, w.acme.ID) })
	gone := map[string]string{
		"Organization(" + w.acme.ID.String() + ")":     "none",
		"Members(" + w.acme.ID.String() + ")":          "[]",
		"Invitations(" + w.acme.ID.String() + ")":      "[]",
		"OrganizationsOf(" + w.ada.String() + ")":      showList([]org.Organization{memberOf(w.globex, org.RoleMember)}, showMembership),
		"CountOrganizationsOf(" + w.ada.String() + ")": "1",
		"OrganizationsOf(" + w.bob.String() + ")":      "[]",
		"CountOrganizationsOf(" + w.bob.String() + ")": "0",
		"InvitationByCode(acme x)":                     "none",
		"InvitationByCode(acme y)":                     "none",
		"InvitationsTo(x@example.com)":                 showList([]org.InvitationRow{w.globexX}, showInvitation),
		"InvitationsTo(y@example.com)":                 "[]",
	}
	s.wantAnswers(t, "after DeleteOrganization", k, before, gone)

	after := s.answers(t, k)
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		if err := s.Views.DeleteOrganization(ctx, tx, w.acme.ID); err != nil {
			return fmt.Errorf("DeleteOrganization again: %w", err)
		}
		return s.Views.DeleteOrganization(ctx, tx, newID(t))
	})
	s.wantAnswers(t, "after DeleteOrganization of organizations that are not there", k, after, nil)

	// Put again, it has none of its members or invitations: their rows
	// went, rather than being hidden.
	s.do(t, func(ctx context.Context, tx uow.Tx) error { return s.Views.PutOrganization(ctx, tx, w.acme) })
	s.wantAnswers(t, "after the organization was put again", k, after, map[string]string{
		"Organization(" + w.acme.ID.String() + ")": showOrganization(w.acme, true),
	})
}

// Sweep deletes the invitations that expired at or before its time, at
// most as many as its limit at once, and nothing else.
func testSweep(t *testing.T, s *suite) {
	// The world's invitations expire a week after they were sent, hours
	// after now.
	w := s.newWorld(t)
	now := start.Add(ttl + 30*time.Minute)
	expired := []string{"long ago", "an hour ago", "just now"}
	live := []string{"in a microsecond", "in an hour"}
	for i, c := range []struct {
		code  string
		in    uuid.UUID
		after time.Duration
	}{
		{expired[0], w.acme.ID, -2 * time.Hour},
		{expired[1], w.globex.ID, -time.Hour},
		{expired[2], w.acme.ID, 0},
		{live[0], w.globex.ID, time.Microsecond},
		{live[1], w.acme.ID, time.Hour},
	} {
		inv := invitation(t, c.in, fmt.Sprintf("%d@example.com", i), c.code, org.RoleMember, w.ada, start)
		inv.ExpiresAt = now.Add(c.after)
		s.putInvitation(t, inv)
	}
	k := w.keys()
	k.codes = append(append(k.codes, expired...), live...)
	before := s.answers(t, k)

	s.sweep(t, now, 2, 2)
	left := 0
	for q, a := range s.answers(t, keys{codes: expired}) {
		if a != "none" {
			t.Logf("left after the first sweep: %s", q)
			left++
		}
	}
	if left != 1 {
		t.Errorf("after a sweep of at most 2 of 3 expired invitations, %d of them are left, want 1", left)
	}
	s.sweep(t, now, 2, 1)
	s.sweep(t, now, 2, 0)
	swept := map[string]string{}
	for _, code := range expired {
		swept["InvitationByCode("+code+")"] = "none"
	}
	var invitations []org.InvitationRow
	s.read(t, func(ctx context.Context, tx uow.Tx) error {
		for _, id := range []uuid.UUID{w.acme.ID, w.globex.ID} {
			list, err := s.Views.Invitations(ctx, tx, id)
			if err != nil {
				return err
			}
			swept["Invitations("+id.String()+")"] = showList(list, showInvitation)
			invitations = append(invitations, list...)
		}
		return nil
	})
	s.wantAnswers(t, "after sweeping every expired invitation", k, before, swept)
	if n := len(invitations); n != 3+len(live) {
		t.Errorf("after the sweeps, the organizations hold %d invitations, want the world's 3 and %d more", n, len(live))
	}

	// An hour on, those that expired within it go; the world's stay.
	s.sweep(t, now.Add(time.Hour), 100, int64(len(live)))
	for _, code := range live {
		swept["InvitationByCode("+code+")"] = "none"
	}
	swept["Invitations("+w.acme.ID.String()+")"] = showList([]org.InvitationRow{w.acmeX, w.acmeY}, showInvitation)
	swept["Invitations("+w.globex.ID.String()+")"] = showList([]org.InvitationRow{w.globexX}, showInvitation)
	s.wantAnswers(t, "after sweeping an hour later", k, before, swept)

	// When the last of the world's has expired, all of them go, and the
	// organizations and their members stay.
	s.sweep(t, w.globexX.ExpiresAt, 100, 3)
	for _, id := range []uuid.UUID{w.acme.ID, w.globex.ID} {
		swept["Invitations("+id.String()+")"] = "[]"
	}
	for _, code := range []string{"acme x", "acme y", "globex x"} {
		swept["InvitationByCode("+code+")"] = "none"
	}
	swept["InvitationsTo(x@example.com)"], swept["InvitationsTo(y@example.com)"] = "[]", "[]"
	s.wantAnswers(t, "after sweeping every invitation", k, before, swept)
}

// A put of a key that is there fails the unit of work, which leaves
// nothing of what it wrote.
func testPutExistingKey(t *testing.T, s *suite) {
	w := s.newWorld(t)
	k := w.keys()
	before := s.answers(t, k)
	for _, c := range []struct {
		name string
		put  func(ctx context.Context, tx uow.Tx) error
	}{
		{"an organization's ID", func(ctx context.Context, tx uow.Tx) error {
			return s.Views.PutOrganization(ctx, tx, org.OrganizationRow{ID: w.acme.ID, Name: "Acme again", CreatedAt: start})
		}},
		{"a member of an organization", func(ctx context.Context, tx uow.Tx) error {
			m := w.bobAcme
			m.Role, m.JoinedAt = org.RoleOwner, start.Add(time.Hour)
			return s.Views.PutMember(ctx, tx, m)
		}},
		{"an invitation's ID", func(ctx context.Context, tx uow.Tx) error {
			i := invitation(t, w.globex.ID, "z@example.com", "another code", org.RoleMember, w.cy, start)
			i.ID = w.acmeX.ID
			return s.Views.PutInvitation(ctx, tx, i)
		}},
		{"an invitation's code", func(ctx context.Context, tx uow.Tx) error {
			i := invitation(t, w.globex.ID, "z@example.com", "acme x", org.RoleMember, w.cy, start)
			return s.Views.PutInvitation(ctx, tx, i)
		}},
	} {
		marker := org.OrganizationRow{ID: newID(t), Name: "Marker", CreatedAt: start}
		err := s.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			if err := s.Views.PutOrganization(ctx, tx, marker); err != nil {
				return err
			}
			return c.put(ctx, tx)
		})
		if err == nil {
			t.Errorf("a put of %s that is there committed", c.name)
		}
		mk := k
		mk.orgs = append(mk.orgs[:len(mk.orgs):len(mk.orgs)], marker.ID)
		s.wantAnswers(t, "after a put of "+c.name+" that is there", mk, before, map[string]string{
			"Organization(" + marker.ID.String() + ")": "none",
			"Members(" + marker.ID.String() + ")":      "[]",
			"Invitations(" + marker.ID.String() + ")":  "[]",
		})
	}
}

// Reset empties every view, and nothing of the user views; a unit of work
// that rolls back undoes it; the same rows can then be put again.
func testReset(t *testing.T, s *suite) {
	w := s.newWorld(t)
	k := w.keys()
	before := s.answers(t, k)

	errUndo := errors.New("undo")
	err := s.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := s.Views.Reset(ctx, tx); err != nil {
			return err
		}
		return errUndo
	})
	if !errors.Is(err, errUndo) {
		t.Fatalf("a unit of work that reset and then failed: %v, want its error", err)
	}
	s.wantAnswers(t, "after a Reset rolled back", k, before, nil)

	s.do(t, s.Views.Reset)
	empty := map[string]string{}
	for q := range before {
		switch {
		case strings.HasPrefix(q, "Organization(") || strings.HasPrefix(q, "InvitationByCode("):
			empty[q] = "none"
		case strings.HasPrefix(q, "CountOrganizationsOf("):
			empty[q] = "0"
		default:
			empty[q] = "[]"
		}
	}
	s.wantAnswers(t, "after Reset", k, before, empty)
	s.read(t, func(ctx context.Context, tx uow.Tx) error {
		for _, id := range []uuid.UUID{w.ada, w.bob, w.cy} {
			if _, found, err := s.Users.User(ctx, tx, id); err != nil || !found {
				t.Errorf("after Reset of the organizations' views, the user views' User(%s): found %t, %v", id, found, err)
			}
		}
		return nil
	})

	// The same rows go in again, and answer as before.
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		for _, o := range []org.OrganizationRow{w.acme, w.globex} {
			if err := s.Views.PutOrganization(ctx, tx, o); err != nil {
				return err
			}
		}
		for _, m := range []org.MemberRow{w.adaAcme, w.bobAcme, w.adaGlobex, w.cyGlobex} {
			if err := s.Views.PutMember(ctx, tx, m); err != nil {
				return err
			}
		}
		for _, i := range []org.InvitationRow{w.acmeX, w.acmeY, w.globexX} {
			if err := s.Views.PutInvitation(ctx, tx, i); err != nil {
				return err
			}
		}
		return nil
	})
	s.wantAnswers(t, "after the rows were put again", k, before, nil)
}

// writes are every write of the views, each of something new or
// something of w, so that each would change what the views answer.
func (s *suite) writes(t *testing.T, w world) []struct {
	name  string
	write func(ctx context.Context, tx uow.Tx) error
} {
	t.Helper()
	stranger := newID(t)
	return []struct {
		name  string
		write func(ctx context.Context, tx uow.Tx) error
	}{
		{"PutOrganization", func(ctx context.Context, tx uow.Tx) error {
			return s.Views.PutOrganization(ctx, tx, org.OrganizationRow{ID: newID(t), Name: "New", CreatedAt: start})
		}},
		{"DeleteOrganization", func(ctx context.Context, tx uow.Tx) error {
			return s.Views.DeleteOrganization(ctx, tx, w.acme.ID)
		}},
		{"PutMember", func(ctx context.Context, tx uow.Tx) error {
			return s.Views.PutMember(ctx, tx, org.MemberRow{OrgID: w.acme.ID, UserID: w.cy, Role: org.RoleMember, JoinedAt: start})
		}},
		{"SetRole", func(ctx context.Context, tx uow.Tx) error {
			return s.Views.SetRole(ctx, tx, w.acme.ID, w.bob, org.RoleOwner)
		}},
		{"DeleteMember", func(ctx context.Context, tx uow.Tx) error {
			return s.Views.DeleteMember(ctx, tx, w.acme.ID, w.bob)
		}},
		{"PutInvitation", func(ctx context.Context, tx uow.Tx) error {
			return s.Views.PutInvitation(ctx, tx, invitation(t, w.acme.ID, "x@example.com", "new", org.RoleMember, stranger, start))
		}},
		{"DeleteInvitation", func(ctx context.Context, tx uow.Tx) error {
			return s.Views.DeleteInvitation(ctx, tx, w.acmeX.ID)
		}},
		{"Reset", s.Views.Reset},
		{"Sweep", func(ctx context.Context, tx uow.Tx) error {
			_, err := s.Views.Sweep(ctx, tx, start.AddDate(1, 0, 0), 100)
			return err
		}},
	}
}

// Every write in a read-only unit of work fails with an error wrapping
// [uow.ErrReadOnly], which the unit of work returns as it is, and changes
// nothing, while the queries answer in it.
func testReadOnly(t *testing.T, s *suite) {
	w := s.newWorld(t)
	k := w.keys()
	before := s.answers(t, k)
	for _, c := range s.writes(t, w) {
		var writeErr error
		err := s.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			if _, found, err := s.Views.Organization(ctx, tx, w.acme.ID); err != nil || !found {
				return fmt.Errorf("Organization(%s) in a read-only unit of work before %s: found %t, %w", w.acme.ID, c.name, found, err)
			}
			writeErr = c.write(ctx, tx)
			return writeErr
		})
		if !errors.Is(writeErr, uow.ErrReadOnly) || err != writeErr {
			t.Errorf("%s in a read-only unit of work: %v, and Read returned %v; want an error wrapping ErrReadOnly, returned as it is", c.name, writeErr, err)
		}
	}
	s.wantAnswers(t, "after the refused writes", k, before, nil)
}

// Every method refuses a transaction of another backend, and none, with
// an error wrapping [uow.ErrForeignTx].
func testForeignTx(t *testing.T, s *suite) {
	w := s.newWorld(t)
	k := w.keys()
	before := s.answers(t, k)
	ctx := t.Context()
	for _, tx := range []uow.Tx{fakeTx{}, &fakeTx{}, nil} {
		for _, c := range s.writes(t, w) {
			if err := c.write(ctx, tx); !errors.Is(err, uow.ErrForeignTx) {
				t.Errorf("%s with a %T: %v, want ErrForeignTx", c.name, tx, err)
			}
		}
		for name, err := range map[string]error{
			"Organization":         second(s.Views.Organization(ctx, tx, w.acme.ID)),
			"OrganizationsOf":      last(s.Views.OrganizationsOf(ctx, tx, w.ada)),
			"CountOrganizationsOf": last(s.Views.CountOrganizationsOf(ctx, tx, w.ada)),
			"Members":              last(s.Views.Members(ctx, tx, w.acme.ID)),
			"Invitations":          last(s.Views.Invitations(ctx, tx, w.acme.ID)),
			"InvitationByCode":     second(s.Views.InvitationByCode(ctx, tx, w.acmeX.CodeHash)),
			"InvitationsTo":        last(s.Views.InvitationsTo(ctx, tx, w.acmeX.Email)),
		} {
			if !errors.Is(err, uow.ErrForeignTx) {
				t.Errorf("%s with a %T: %v, want ErrForeignTx", name, tx, err)
			}
		}
	}
	s.wantAnswers(t, "after the refused calls", k, before, nil)
}

// last returns the error of a call that returns a value and an error.
func last[T any](_ T, err error) error { return err }

// second returns the error of a call that returns a value, whether it
// found it, and an error.
func second[T any](_ T, _ bool, err error) error { return err }

// member is how Members shows m, of an account at email.
func member(m org.MemberRow, email string) org.Member {
	return org.Member{UserID: m.UserID, Email: email, Role: m.Role, JoinedAt: m.JoinedAt}
}

// sortedByID returns list ordered by ID, as the suite shows the answers
// of InvitationsTo.
func sortedByID(list ...org.InvitationRow) []org.InvitationRow {
	return slices.SortedFunc(slices.Values(list), func(a, b org.InvitationRow) int {
		return strings.Compare(a.ID.String(), b.ID.String())
	})
}
