package org

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
)

// story builds an organization's state from the data of its events, as
// appended one after another at the given times.
type story struct {
	t      *testing.T
	id     uuid.UUID
	events []eventstore.Event
	now    time.Time
}

var t0 = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

func newStory(t *testing.T) *story {
	return &story{t: t, id: uuid.New(), now: t0}
}

// then appends the data at the story's time, which then moves on a
// second.
func (s *story) then(data ...any) *story {
	s.t.Helper()
	for _, d := range data {
		e, err := events.New(d, eventstore.Metadata{})
		if err != nil {
			s.t.Fatal(err)
		}
		e.Stream, e.Version, e.RecordedAt = streamOf(s.id), int64(len(s.events)+1), s.now
		s.events = append(s.events, e)
	}
	s.now = s.now.Add(time.Second)
	return s
}

func (s *story) state() organization {
	s.t.Helper()
	o, err := foldOrganization(s.id, s.events)
	if err != nil {
		s.t.Fatal(err)
	}
	return o
}

var (
	ada = uuid.MustParse("0190a3b1-0000-7000-8000-00000000a0a0")
	bob = uuid.MustParse("0190a3b1-0000-7000-8000-00000000b0b0")
	cy  = uuid.MustParse("0190a3b1-0000-7000-8000-00000000c0c0")
	dee = uuid.MustParse("0190a3b1-0000-7000-8000-00000000d0d0")
)

// created is a story of an organization that Ada created, with Bob and Cy
// members who joined in that order.
func created(t *testing.T) *story {
	return newStory(t).then(decideCreate(ada, "Engines")...).
		then(MemberAdded{UserID: bob, Role: RoleMember}).
		then(MemberAdded{UserID: cy, Role: RoleMember})
}

func sent(id uuid.UUID, hash string, expires time.Time) InvitationSent {
	return InvitationSent{InvitationID: id, Email: "enc:v1:x", Role: RoleMember, CodeHash: hash, ExpiresAt: expires, InvitedBy: ada}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

func wantEvents(t *testing.T, what string, got []any, err error, want ...any) {
	t.Helper()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%s: %+v (%v), want %+v", what, got, err, want)
	}
}

func TestDecideCreate(t *testing.T) {
	o := newStory(t).then(decideCreate(ada, "Engines")...).state()
	if !o.exists() || o.name != "Engines" || o.members[ada].role != RoleOwner || len(o.members) != 1 || !o.createdAt.Equal(t0) {
		t.Errorf("a new organization is %+v, want Engines with Ada its owner", o)
	}
	if newOrganization(uuid.New()).exists() {
		t.Error("a stream without events is an organization")
	}
}

func TestDecideInvite(t *testing.T) {
	p := Policy{}.WithDefaults()
	s := created(t)
	in := invite{id: uuid.New(), email: "enc:v1:x", role: RoleMember, codeHash: "h", expiresAt: s.now.Add(p.InvitationTTL)}
	o := s.state()
	_, err := o.decideInvite(bob, in, s.now, p)
	wantErr(t, "a member inviting", err, ErrNotOwner)
	_, err = o.decideInvite(dee, in, s.now, p)
	wantErr(t, "a stranger inviting", err, ErrNotFound)
	_, err = newOrganization(s.id).decideInvite(ada, in, s.now, p)
	wantErr(t, "inviting to no organization", err, ErrNotFound)
	member := in
	member.member = true
	_, err = o.decideInvite(ada, member, s.now, p)
	wantErr(t, "inviting a member's address", err, ErrAlreadyMember)
	got, err := o.decideInvite(ada, in, s.now, p)
	wantEvents(t, "an owner inviting", got, err, InvitationSent{
		InvitationID: in.id, Email: in.email, Role: RoleMember, CodeHash: "h", ExpiresAt: in.expiresAt, InvitedBy: ada,
	})

	// A new invitation to the same address voids the earlier ones still
	// open; one that is gone already is not voided again.
	s.then(got...)
	gone := uuid.New()
	again := in
	again.id, again.earlier = uuid.New(), []uuid.UUID{in.id, gone}
	got, err = s.state().decideInvite(ada, again, s.now, p)
	if err != nil || len(got) != 2 || got[0] != (InvitationVoided{InvitationID: in.id, Reason: VoidedReplaced}) {
		t.Errorf("inviting the address again: %+v (%v), want the first voided, then the new one", got, err)
	}
}

func TestDecideInviteLimit(t *testing.T) {
	p := Policy{InvitationLimit: 3, InvitationWindow: time.Hour}.WithDefaults()
	s := created(t)
	first := s.now
	for range 3 {
		s.then(sent(uuid.New(), "h", s.now.Add(p.InvitationTTL)))
		s.now = s.now.Add(time.Minute)
	}
	in := invite{id: uuid.New(), role: RoleMember, codeHash: "h"}
	_, err := s.state().decideInvite(ada, in, s.now, p)
	var tooMany *TooManyInvitationsError
	if !errors.As(err, &tooMany) || !errors.Is(err, ErrTooManyInvitations) {
		t.Fatalf("the fourth invitation within the hour: %v, want a TooManyInvitationsError", err)
	}
	if want := first.Add(time.Hour).Sub(s.now); tooMany.RetryAfter != want {
		t.Errorf("retry after %s, want %s, when the first leaves the window", tooMany.RetryAfter, want)
	}
	if _, err := s.state().decideInvite(ada, in, first.Add(time.Hour), p); err != nil {
		t.Errorf("once the first left the window: %v", err)
	}
	if _, err := s.state().decideInvite(ada, in, first.Add(time.Hour-time.Nanosecond), p); !errors.Is(err, ErrTooManyInvitations) {
		t.Errorf("just before the first left the window: %v, want ErrTooManyInvitations", err)
	}
}

func TestDecideRevoke(t *testing.T) {
	id := uuid.New()
	s := created(t).then(sent(id, "h", t0.Add(time.Hour)))
	o := s.state()
	_, err := o.decideRevoke(bob, id, s.now)
	wantErr(t, "a member revoking", err, ErrNotOwner)
	_, err = o.decideRevoke(ada, uuid.New(), s.now)
	wantErr(t, "revoking an unknown invitation", err, ErrNotFound)
	_, err = o.decideRevoke(ada, id, t0.Add(time.Hour))
	wantErr(t, "revoking an expired invitation", err, ErrNotFound)
	got, err := o.decideRevoke(ada, id, s.now)
	wantEvents(t, "an owner revoking", got, err, InvitationRevoked{InvitationID: id, By: ada})
	_, err = s.then(got...).state().decideRevoke(ada, id, s.now)
	wantErr(t, "revoking again", err, ErrNotFound)
}

func TestDecideAccept(t *testing.T) {
	id := uuid.New()
	s := created(t).then(sent(id, "hash", t0.Add(time.Hour)))
	o := s.state()
	ok := acceptance{user: dee, invitation: id, codeHash: "hash", sameAddress: true}
	for _, c := range []struct {
		what string
		a    func(a acceptance) acceptance
		now  time.Time
		want error
	}{
		{"another code's hash", func(a acceptance) acceptance { a.codeHash = "other"; return a }, s.now, ErrInvalidCode},
		{"an unknown invitation", func(a acceptance) acceptance { a.invitation = uuid.New(); return a }, s.now, ErrInvalidCode},
		{"an expired invitation", func(a acceptance) acceptance { return a }, t0.Add(time.Hour), ErrInvalidCode},
		{"another address, even a member's", func(a acceptance) acceptance { a.user, a.sameAddress = bob, false; return a }, s.now, ErrWrongAddress},
		{"a member", func(a acceptance) acceptance { a.user = bob; return a }, s.now, ErrAlreadyMember},
		{"an account in too many", func(a acceptance) acceptance { a.orgs = MaxOrganizations; return a }, s.now, ErrTooManyOrganizations},
	} {
		_, err := o.decideAccept(c.a(ok), c.now)
		wantErr(t, "accepting with "+c.what, err, c.want)
	}
	full := o
	full.members = map[uuid.UUID]member{ada: o.members[ada]}
	for range MaxMembers - 1 {
		full.members[uuid.New()] = member{role: RoleOwner}
	}
	_, err := full.decideAccept(ok, s.now)
	wantErr(t, "accepting into a full organization", err, ErrFull)
	got, err := o.decideAccept(acceptance{user: dee, invitation: id, codeHash: "hash", sameAddress: true, orgs: MaxOrganizations - 1}, s.now)
	wantEvents(t, "accepting", got, err, InvitationAccepted{InvitationID: id, UserID: dee}, MemberAdded{UserID: dee, Role: RoleMember, InvitationID: id})
	_, err = s.then(got...).state().decideAccept(ok, s.now)
	wantErr(t, "accepting again", err, ErrInvalidCode)

	// A stream may hold an invitation pending from a member who is no
	// longer an owner, appended before such invitations were voided.
	demoted := created(t).then(RoleChanged{UserID: bob, Role: RoleOwner, By: ada}).
		then(sent(id, "hash", t0.Add(time.Hour))).then(RoleChanged{UserID: ada, Role: RoleMember, By: bob})
	_, err = demoted.state().decideAccept(ok, demoted.now)
	wantErr(t, "accepting the invitation of a demoted owner", err, ErrInvalidCode)
}

func TestDecideChangeRole(t *testing.T) {
	s := created(t)
	o := s.state()
	_, err := o.decideChangeRole(bob, cy, RoleOwner, s.now)
	wantErr(t, "a member promoting", err, ErrNotOwner)
	_, err = o.decideChangeRole(dee, cy, RoleOwner, s.now)
	wantErr(t, "a stranger promoting", err, ErrNotFound)
	_, err = o.decideChangeRole(ada, dee, RoleOwner, s.now)
	wantErr(t, "promoting a stranger", err, ErrNotFound)
	_, err = o.decideChangeRole(ada, ada, RoleMember, s.now)
	wantErr(t, "the last owner demoting itself", err, ErrLastOwner)
	got, err := o.decideChangeRole(ada, cy, RoleMember, s.now)
	wantEvents(t, "giving a member its own role", got, err)
	got, err = o.decideChangeRole(ada, bob, RoleOwner, s.now)
	wantEvents(t, "promoting", got, err, RoleChanged{UserID: bob, Role: RoleOwner, By: ada})
	got, err = s.then(got...).state().decideChangeRole(bob, ada, RoleMember, s.now)
	wantEvents(t, "demoting one of two owners", got, err, RoleChanged{UserID: ada, Role: RoleMember, By: bob})
	_, err = s.then(got...).state().decideChangeRole(ada, bob, RoleMember, s.now)
	wantErr(t, "the demoted owner demoting the other", err, ErrNotOwner)
}

// An invitation works only while the owner who sent it is one: each
// decision by which a member stops being an owner voids the invitations
// it sent that are still pending, and no other.
func TestDecideVoidsTheInvitationsOfAnOwnerNoMore(t *testing.T) {
	// Ada and Bob own Engines, and each sent an invitation still
	// pending; Ada sent one more, which expired.
	mine, theirs, expired := uuid.New(), uuid.New(), uuid.New()
	s := created(t).then(RoleChanged{UserID: bob, Role: RoleOwner, By: ada}).
		then(sent(expired, "h0", t0.Add(time.Second))).
		then(sent(mine, "h1", t0.Add(time.Hour))).
		then(InvitationSent{InvitationID: theirs, Role: RoleOwner, CodeHash: "h2", ExpiresAt: t0.Add(time.Hour), InvitedBy: bob})
	o := s.state()
	voided := InvitationVoided{InvitationID: mine, Reason: VoidedInviterNotOwner}

	got, err := o.decideChangeRole(bob, ada, RoleMember, s.now)
	wantEvents(t, "demoting Ada", got, err, voided, RoleChanged{UserID: ada, Role: RoleMember, By: bob})
	got, err = o.decideRemove(bob, ada, s.now)
	wantEvents(t, "removing Ada", got, err, voided, MemberRemoved{UserID: ada, Reason: RemovedByOwner, By: bob})
	got, err = o.decideRemove(ada, ada, s.now)
	wantEvents(t, "Ada leaving", got, err, voided, MemberRemoved{UserID: ada, Reason: RemovedLeft, By: ada})
	wantEvents(t, "erasing Ada", o.decideErase(ada, nil, s.now), nil, voided, MemberRemoved{UserID: ada, Reason: RemovedErased})
	// Where Ada's address was invited too, the erasure voids that
	// invitation once, as the address's.
	wantEvents(t, "erasing Ada, whose address Ada invited", o.decideErase(ada, []uuid.UUID{mine}, s.now), nil,
		InvitationVoided{InvitationID: mine, Reason: VoidedErased}, MemberRemoved{UserID: ada, Reason: RemovedErased})

	// Once pending no more, an invitation is not voided.
	got, err = o.decideChangeRole(bob, ada, RoleMember, t0.Add(time.Hour))
	wantEvents(t, "demoting Ada once her invitations expired", got, err, RoleChanged{UserID: ada, Role: RoleMember, By: bob})
	got, err = s.then(InvitationRevoked{InvitationID: mine, By: ada}).state().decideRemove(bob, ada, s.now)
	wantEvents(t, "removing Ada once her invitation is revoked", got, err, MemberRemoved{UserID: ada, Reason: RemovedByOwner, By: bob})

	// Bob's invitation stays, and a member who was no owner voids
	// nothing; nor does a promotion.
	after := s.then(voided, RoleChanged{UserID: ada, Role: RoleMember, By: bob}).state()
	if _, ok := after.pending(theirs, s.now); !ok || len(after.invitations) != 2 {
		t.Errorf("after Ada's demotion the invitations are %+v, want Bob's pending and the expired one", after.invitations)
	}
	got, err = after.decideRemove(bob, cy, s.now)
	wantEvents(t, "removing a member", got, err, MemberRemoved{UserID: cy, Reason: RemovedByOwner, By: bob})
	got, err = after.decideChangeRole(bob, ada, RoleOwner, s.now)
	wantEvents(t, "promoting Ada again", got, err, RoleChanged{UserID: ada, Role: RoleOwner, By: bob})
}

func TestDecideRemove(t *testing.T) {
	s := created(t)
	o := s.state()
	_, err := o.decideRemove(bob, cy, s.now)
	wantErr(t, "a member removing another", err, ErrNotOwner)
	_, err = o.decideRemove(dee, dee, s.now)
	wantErr(t, "a stranger leaving", err, ErrNotFound)
	_, err = o.decideRemove(ada, dee, s.now)
	wantErr(t, "removing a stranger", err, ErrNotFound)
	_, err = o.decideRemove(ada, ada, s.now)
	wantErr(t, "the last owner leaving", err, ErrLastOwner)
	got, err := o.decideRemove(bob, bob, s.now)
	wantEvents(t, "a member leaving", got, err, MemberRemoved{UserID: bob, Reason: RemovedLeft, By: bob})
	got, err = o.decideRemove(ada, cy, s.now)
	wantEvents(t, "an owner removing a member", got, err, MemberRemoved{UserID: cy, Reason: RemovedByOwner, By: ada})
	s.then(RoleChanged{UserID: bob, Role: RoleOwner, By: ada})
	got, err = s.state().decideRemove(bob, ada, s.now)
	wantEvents(t, "an owner removing another owner", got, err, MemberRemoved{UserID: ada, Reason: RemovedByOwner, By: bob})
}

func TestDecideDelete(t *testing.T) {
	first, second := uuid.New(), uuid.New()
	s := created(t).then(sent(first, "h1", t0)).then(sent(second, "h2", t0.Add(time.Hour)))
	o := s.state()
	_, err := o.decideDelete(bob)
	wantErr(t, "a member deleting", err, ErrNotOwner)
	got, err := o.decideDelete(ada)
	wantEvents(t, "an owner deleting", got, err,
		InvitationVoided{InvitationID: first, Reason: VoidedDeleted},
		InvitationVoided{InvitationID: second, Reason: VoidedDeleted},
		Deleted{By: ada, Reason: DeletedByOwner})
	_, err = s.then(got...).state().decideDelete(ada)
	wantErr(t, "deleting again", err, ErrNotFound)
}

func TestDecideErase(t *testing.T) {
	inv := uuid.New()
	// Cy joined before Bob, at the same time: Cy has stood the longest.
	s := newStory(t).then(decideCreate(ada, "Engines")...).
		then(MemberAdded{UserID: dee, Role: RoleMember}).
		then(MemberAdded{UserID: cy, Role: RoleMember}, MemberAdded{UserID: bob, Role: RoleMember}).
		then(sent(inv, "h", t0.Add(time.Hour)))
	o := s.state()
	o.members[dee] = member{role: RoleMember, joinedAt: t0.Add(time.Hour), since: 2}
	// Ada sent inv: the owner who takes over does not inherit it.
	wantEvents(t, "erasing the last owner", o.decideErase(ada, nil, s.now), nil,
		RoleChanged{UserID: cy, Role: RoleOwner},
		InvitationVoided{InvitationID: inv, Reason: VoidedInviterNotOwner},
		MemberRemoved{UserID: ada, Reason: RemovedErased})
	wantEvents(t, "erasing a member with an invitation", o.decideErase(bob, []uuid.UUID{inv, uuid.New()}, s.now), nil,
		InvitationVoided{InvitationID: inv, Reason: VoidedErased}, MemberRemoved{UserID: bob, Reason: RemovedErased})
	wantEvents(t, "erasing a stranger", o.decideErase(uuid.New(), nil, s.now), nil)

	other := uuid.New()
	alone := newStory(t).then(decideCreate(ada, "Solo")...).then(sent(inv, "h", t0.Add(time.Hour))).then(sent(other, "h2", t0))
	wantEvents(t, "erasing the last member", alone.state().decideErase(ada, []uuid.UUID{inv}, alone.now), nil,
		InvitationVoided{InvitationID: inv, Reason: VoidedErased},
		MemberRemoved{UserID: ada, Reason: RemovedErased},
		InvitationVoided{InvitationID: other, Reason: VoidedDeleted},
		Deleted{Reason: DeletedErased})
	wantEvents(t, "erasing a member of a deleted organization",
		alone.then(Deleted{By: ada, Reason: DeletedByOwner}).state().decideErase(ada, []uuid.UUID{inv}, alone.now), nil)
}

func TestValidName(t *testing.T) {
	for in, want := range map[string]string{
		"Engines":                          "Engines",
		"  Ада и партнёры \t":              "Ада и партнёры",
		"株式会社":                             "株式会社",
		strings.Repeat("é", MaxNameLength): strings.Repeat("é", MaxNameLength),
		"👩\u200d💻 Team":                    "👩\u200d💻 Team",
		"می\u200cخواهم":                    "می\u200cخواهم",
	} {
		if got, err := ValidName(in); err != nil || got != want {
			t.Errorf("ValidName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "   ", strings.Repeat("x", MaxNameLength+1), "a\x00b", "a\nb", "bell\a", "\xff\xfe", "del\x7f",
		"evil\u202egpj.exe", "\u2066isolate\u2069", "a\u200bb", "\u200b", "\u200d", "\u00a0\u3000", "a\u2028b", "a\u2029b", "\ufeffBOM"} {
		if got, err := ValidName(in); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidName(%q) = %q, %v; want ErrInvalidName", in, got, err)
		}
	}
}

func TestCodes(t *testing.T) {
	code, hash := newCode()
	if len(code) != 32 || strings.ToLower(code) != code || !validCode(code) || hashCode(code) != hash || len(hash) != 64 {
		t.Errorf("newCode() = %q, %q", code, hash)
	}
	if hashCode(" "+strings.ToUpper(code)+"\n") != hash || !validCode(strings.ToUpper(code)) {
		t.Error("a code typed in upper case, or with spaces around it, is another")
	}
	for _, bad := range []string{"", code[:31], code + "a", code[:31] + "1", code[:31] + "!"} {
		if validCode(bad) {
			t.Errorf("validCode(%q) = true", bad)
		}
	}
	if other, _ := newCode(); other == code {
		t.Error("two codes are the same")
	}
}
