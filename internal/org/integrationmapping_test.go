package org

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org/integration"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/schemas"
)

// TestIntegrationMapping maps domain events as the commands append them
// to integration events, each published in the CloudEvent the outbox
// stores, and holds it to its JSON Schema under schemas/ and to the data
// it should carry: the organization, the member, the role or the reason,
// the version, and nothing else of the domain event (no invitation, no
// acting owner). Every integration event has its case, and so has every
// reason and role.
func TestIntegrationMapping(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000cc")
	ada := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000aa")
	bob := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000bb")
	invitation := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000dd")
	events := publish.Events{Source: "https://accounts.example.com", Destinations: []publish.Destination{publish.Broker}}
	orgID, adaID := `"organization_id":"`+id.String()+`"`, `"user_id":"`+ada.String()+`"`
	cases := []struct {
		name string
		data any
		// event is the integration event's data, as JSON.
		event string
	}{
		{"MemberAdded creator", MemberAdded{UserID: ada, Role: RoleOwner}, `{` + orgID + `,` + adaID + `,"role":"owner","version":2}`},
		{"MemberAdded invited", MemberAdded{UserID: ada, Role: RoleMember, InvitationID: invitation},
			`{` + orgID + `,` + adaID + `,"role":"member","version":5}`},
		{"RoleChanged by an owner", RoleChanged{UserID: ada, Role: RoleOwner, By: bob}, `{` + orgID + `,` + adaID + `,"role":"owner","version":6}`},
		{"RoleChanged by the erasure", RoleChanged{UserID: ada, Role: RoleOwner}, `{` + orgID + `,` + adaID + `,"role":"owner","version":6}`},
		{"RoleChanged demoted", RoleChanged{UserID: ada, Role: RoleMember, By: bob}, `{` + orgID + `,` + adaID + `,"role":"member","version":6}`},
		{"MemberRemoved removed", MemberRemoved{UserID: ada, Reason: RemovedByOwner, By: bob},
			`{` + orgID + `,` + adaID + `,"reason":"removed","version":7}`},
		{"MemberRemoved left", MemberRemoved{UserID: ada, Reason: RemovedLeft, By: ada}, `{` + orgID + `,` + adaID + `,"reason":"left","version":7}`},
		{"MemberRemoved erased", MemberRemoved{UserID: ada, Reason: RemovedErased}, `{` + orgID + `,` + adaID + `,"reason":"erased","version":7}`},
		{"Deleted by an owner", Deleted{By: bob, Reason: DeletedByOwner}, `{` + orgID + `,"reason":"deleted","version":9}`},
		{"Deleted erased", Deleted{Reason: DeletedErased}, `{` + orgID + `,"reason":"erased","version":9}`},
	}
	var mapped []string
	for _, tc := range cases {
		var want struct{ Version int64 }
		if err := json.Unmarshal([]byte(tc.event), &want); err != nil {
			t.Fatal(err)
		}
		e, err := integrationEvent(id, tc.data, want.Version)
		if err != nil || e == nil {
			t.Fatalf("%s: %v, %v", tc.name, e, err)
		}
		mapped = append(mapped, e.Type())
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msgs, err := events.Messages(e.Type(), e.Subject(), e, time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			payload := msgs[0].Payload
			if err := schemas.Check(payload); err != nil {
				t.Errorf("the event does not match its schema: %v\n%s", err, payload)
			}
			var ce publish.CloudEvent
			if err := json.Unmarshal(payload, &ce); err != nil {
				t.Fatal(err)
			}
			if ce.Subject != id.String() || msgs[0].Key != "broker:"+id.String() {
				t.Errorf("subject %q, key %q; want the organization %s", ce.Subject, msgs[0].Key, id)
			}
			var got, want any
			if err := json.Unmarshal(ce.Data, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.event), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("data %s, want %s", ce.Data, tc.event)
			}
			for _, other := range []string{invitation.String(), bob.String()} {
				if strings.Contains(string(payload), other) {
					t.Errorf("the event carries %s of its domain event: %s", other, payload)
				}
			}
		})
	}
	slices.Sort(mapped)
	mapped = slices.Compact(mapped)
	if want := slices.Sorted(slices.Values(integration.Types())); !slices.Equal(mapped, want) {
		t.Errorf("mapped to %v, want each of %v", mapped, want)
	}
}

// Every type of the domain is decided on: it publishes an integration
// event, or it publishes none on purpose. A type added to the domain
// fails here until it is.
func TestIntegrationEventDecidedForEveryType(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000cc")
	published := map[string]string{
		TypeMemberAdded:   integration.TypeMemberAdded,
		TypeRoleChanged:   integration.TypeRoleChanged,
		TypeMemberRemoved: integration.TypeMemberRemoved,
		TypeDeleted:       integration.TypeDeleted,
	}
	for _, typ := range events.Types() {
		goType, ok := events.GoType(typ)
		if !ok {
			t.Fatalf("%s has no Go type", typ)
		}
		e, err := integrationEvent(id, reflect.New(goType).Elem().Interface(), 1)
		switch {
		case err != nil:
			t.Errorf("%s: %v", typ, err)
		case published[typ] == "" && e != nil:
			t.Errorf("%s publishes %s", typ, e.Type())
		case published[typ] != "" && (e == nil || e.Type() != published[typ]):
			t.Errorf("%s publishes %v, want %s", typ, e, published[typ])
		}
	}
	if _, err := integrationEvent(id, struct{ Name string }{}, 1); err == nil {
		t.Error("an event of no type of the domain was mapped without an error")
	}
}
