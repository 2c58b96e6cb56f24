package integration_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/schemas"
)

// Every integration event type has a schema, and so has every legacy
// type, whose events may still wait in an outbox; every schema of a
// user's event is of one of them.
func TestEveryIntegrationEventHasASchema(t *testing.T) {
	types, err := schemas.Types()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, typ := range types {
		if strings.HasPrefix(integration.Route(typ), "user.") {
			got = append(got, typ)
		}
	}
	want := append(integration.Types(), slices.Collect(maps.Keys(integration.Legacy()))...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("schemas for %v, want one for each of %v", got, want)
	}
}

// A type cannot be mistaken for a domain event's ("user.registered"): it
// begins with the namespace and ends with its version. Each legacy type
// was replaced by one of today's, routed where the legacy one was.
func TestTypesAreNamespacedAndVersioned(t *testing.T) {
	for _, typ := range integration.Types() {
		name, ok := strings.CutPrefix(typ, integration.Namespace+".")
		if !ok || !strings.HasSuffix(name, ".v1") || strings.Count(name, ".") != 2 {
			t.Errorf("type %q, want %s.AGGREGATE.FACT.vN", typ, integration.Namespace)
		}
	}
	replaced := map[string]bool{}
	for legacy, typ := range integration.Legacy() {
		if !slices.Contains(integration.Types(), typ) {
			t.Errorf("legacy type %s replaced by %s, which is not published", legacy, typ)
		}
		if replaced[typ] {
			t.Errorf("%s replaces two legacy types", typ)
		}
		replaced[typ] = true
		if got := integration.Route(typ); got != legacy {
			t.Errorf("%s is routed by %q, want %q, where %s went", typ, got, legacy, legacy)
		}
	}
}

func TestRoute(t *testing.T) {
	for typ, want := range map[string]string{
		integration.TypeRegistered:                      "user.registered",
		integration.TypeDeleted:                         "user.deleted",
		"user.signed_in":                                "user.signed_in",
		integration.Namespace + ".user.registered.v12":  "user.registered",
		integration.Namespace + ".user.version_changed": "user.version_changed",
		integration.Namespace + ".user.version":         "user.version",
		integration.Namespace + ".user.v":               "user.v",
		"org.example.user.registered.v1":                "org.example.user.registered.v1",
		integration.Namespace + "x.user.registered.v1":  integration.Namespace + "x.user.registered.v1",
	} {
		if got := integration.Route(typ); got != want {
			t.Errorf("Route(%q) = %q, want %q", typ, got, want)
		}
	}
}

// Each event's Go type names its type and its subject, and every type has
// its Go type.
func TestEventsNameTheirTypeAndSubject(t *testing.T) {
	id := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000aa")
	events := map[string]integration.Event{
		integration.TypeRegistered:   integration.Registered{UserID: id},
		integration.TypeSignedIn:     integration.SignedIn{UserID: id},
		integration.TypeEmailChanged: integration.EmailChanged{UserID: id},
		integration.TypeDeleted:      integration.Deleted{UserID: id},
	}
	if got, want := slices.Sorted(maps.Keys(events)), slices.Sorted(slices.Values(integration.Types())); !slices.Equal(got, want) {
		t.Errorf("events of %v, want one of each of %v", got, want)
	}
	for want, e := range events {
		if e.Type() != want || e.Subject() != id.String() {
			t.Errorf("%T: type %q, subject %q; want %q about %s", e, e.Type(), e.Subject(), want, id)
		}
	}
}
