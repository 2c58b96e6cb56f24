package user

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/schemas"
)

// TestIntegrationMapping maps domain events as the commands append them
// to integration events, each published in the CloudEvent the outbox
// stores, and holds it to its JSON Schema under schemas/ and to the data
// it should carry: the user, the address in the clear, the version, and
// nothing else of the domain event (no sealed address, no hash of a code).
// Every integration event has its case.
func TestIntegrationMapping(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000aa")
	const (
		sealed = "enc:v1:c2VhbGVkIGJ5IHRoZSBrZXlyaW5n" // an address as a domain event holds it
		hash   = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
	)
	expires := time.Date(2031, 3, 4, 5, 21, 7, 0, time.UTC)
	token, err := ParseTokenHash(hash) // a session event's hash, as it holds it
	if err != nil {
		t.Fatal(err)
	}
	tokenText, _ := token.MarshalText()
	events := publish.Events{Source: "https://accounts.example.com", Destinations: []publish.Destination{publish.Broker}}
	cases := []struct {
		name  string
		event integration.Event
		// data is the CloudEvent's data, as JSON.
		data string
	}{
		{"Registered", registered(Registered{UserID: id, Email: sealed}, "ada@example.com", 1),
			`{"user_id":"` + id.String() + `","email":"ada@example.com","version":1}`},
		{"SignedIn", signedIn(id, SessionStarted{TokenHash: token, ExpiresAt: expires, Client: "Firefox on Linux"}, 2),
			`{"user_id":"` + id.String() + `","version":2}`},
		{"EmailChanged", emailChanged(EmailChanged{
			UserID: id, OldEmail: sealed, NewEmail: sealed, CodeHash: hash, UndoCodeHash: hash, UndoExpiresAt: expires,
		}, "ada@new.example", 4),
			`{"user_id":"` + id.String() + `","email":"ada@new.example","version":4}`},
		{"EmailChangeUndone", emailChanged(EmailChangeUndone{UserID: id, Email: sealed, CodeHash: hash}, "ada@example.com", 6),
			`{"user_id":"` + id.String() + `","email":"ada@example.com","version":6}`},
		{"Erased", deleted(Erased{UserID: id}, 9),
			`{"user_id":"` + id.String() + `","version":9}`},
	}
	var mapped []string
	for _, tc := range cases {
		mapped = append(mapped, tc.event.Type())
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msgs, err := events.Messages(tc.event.Type(), tc.event.Subject(), tc.event, expires)
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
			if ce.Subject != id.String() {
				t.Errorf("subject %q, want the user %s", ce.Subject, id)
			}
			var got, want any
			if err := json.Unmarshal(ce.Data, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.data), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("data %s, want %s", ce.Data, tc.data)
			}
			for _, secret := range []string{sealed, hash, string(tokenText), "Firefox"} {
				if strings.Contains(string(payload), secret) {
					t.Errorf("the event carries %q of its domain event: %s", secret, payload)
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
