package integration_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org/integration"
	userintegration "github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/schemas"
)

// Every type of the domain has a schema, and every schema of an
// organization's event is of one of its types.
func TestEveryIntegrationEventHasASchema(t *testing.T) {
	types, err := schemas.Types()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, typ := range types {
		if strings.HasPrefix(userintegration.Route(typ), "org.") {
			got = append(got, typ)
		}
	}
	if want := slices.Sorted(slices.Values(integration.Types())); !slices.Equal(got, want) {
		t.Errorf("schemas for %v, want one for each of %v", got, want)
	}
}

// A type cannot be mistaken for a domain event's ("org.member_added"):
// it begins with the namespace that the user's types begin with and ends
// with its version, and is routed on a broker as "org.FACT", where its
// later versions will go too.
func TestTypesAreNamespacedVersionedAndRouted(t *testing.T) {
	for _, typ := range integration.Types() {
		name, ok := strings.CutPrefix(typ, userintegration.Namespace+".org.")
		if !ok || !strings.HasSuffix(name, ".v1") || strings.Count(name, ".") != 1 {
			t.Errorf("type %q, want %s.org.FACT.vN", typ, userintegration.Namespace)
		}
		if got, want := userintegration.Route(typ), "org."+strings.TrimSuffix(name, ".v1"); got != want {
			t.Errorf("%s is routed by %q, want %q", typ, got, want)
		}
		if slices.Contains(userintegration.Types(), typ) {
			t.Errorf("%s is a type of the user domain's too", typ)
		}
	}
}

// Each event's Go type names its type and its subject, the organization,
// and every type has its Go type.
func TestEventsNameTheirTypeAndSubject(t *testing.T) {
	id := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000cc")
	member := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000aa")
	events := map[string]integration.Event{
		integration.TypeMemberAdded:   integration.MemberAdded{OrganizationID: id, UserID: member},
		integration.TypeRoleChanged:   integration.RoleChanged{OrganizationID: id, UserID: member},
		integration.TypeMemberRemoved: integration.MemberRemoved{OrganizationID: id, UserID: member},
		integration.TypeDeleted:       integration.Deleted{OrganizationID: id},
	}
	if got, want := slices.Sorted(maps.Keys(events)), slices.Sorted(slices.Values(integration.Types())); !slices.Equal(got, want) {
		t.Errorf("events of %v, want one of each of %v", got, want)
	}
	for want, e := range events {
		if e.Type() != want || e.Subject() != id.String() {
			t.Errorf("%T: type %q, subject %q; want %q about the organization %s", e, e.Type(), e.Subject(), want, id)
		}
	}
}
