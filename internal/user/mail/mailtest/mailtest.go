// Package mailtest reads, in tests, the mail that the user commands added to
// an outbox, as a relay would but without sending anything.
package mailtest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// Sent is one mail a command put in the outbox.
type Sent struct {
	// ID is the outbox message's ID.
	ID uuid.UUID
	// Topic is the outbox topic, one of mail's Topic constants.
	Topic string
	// Link is the message's payload.
	Link mail.Link
}

// batch is how many messages Take claims at a time.
const batch = 1000

// lease is how long Take holds a message it has claimed; it acknowledges
// each one at once, so any positive lease serves.
const lease = time.Minute

// Take claims every message of the mail topics of store that is due by
// now, leaving other topics' messages where they are, decodes each
// payload as a [mail.Link], acknowledges it as a relay would after a
// delivery, and returns the mails earliest due first: oldest first, since a
// message is due when it is added. A caller that wants every message passes
// a time far in the future. Take fails t on a store error and on a payload
// that is not a mail.Link, a JSON object with a field that Link lacks
// included.
func Take(t testing.TB, store outbox.Store, now time.Time) []Sent {
	t.Helper()
	var out []Sent
	for {
		ctx := outbox.WithScope(t.Context(), outbox.Scope{Only: mail.Topics})
		msgs, err := store.Claim(ctx, now, lease, batch)
		if err != nil {
			t.Fatalf("mailtest: claim: %v", err)
		}
		for _, m := range msgs {
			s := Sent{ID: m.ID, Topic: m.Topic}
			dec := json.NewDecoder(bytes.NewReader(m.Payload))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&s.Link); err != nil {
				t.Fatalf("mailtest: outbox message %s on %s: payload %s is not a mail.Link: %v", m.ID, m.Topic, m.Payload, err)
			}
			if err := store.Ack(t.Context(), m.ID); err != nil {
				t.Fatalf("mailtest: ack %s: %v", m.ID, err)
			}
			out = append(out, s)
		}
		if len(msgs) < batch {
			return out
		}
	}
}
