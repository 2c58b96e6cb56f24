package operator

import (
	"encoding/json"
	neturl "net/url"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
)

// RecordJSON is a message as [Outbox.List] and [Outbox.Show] print it in
// JSON. DueAt is when it may next be claimed, and absent while it is
// buried. RequestID and TraceParent (W3C trace context) name the request
// and the span that added it ([outbox.Origin]).
type RecordJSON struct {
	ID          uuid.UUID       `json:"id"`
	Topic       string          `json:"topic"`
	State       string          `json:"state"`
	Attempts    int             `json:"attempts"`
	CreatedAt   time.Time       `json:"created_at"`
	DueAt       *time.Time      `json:"due_at,omitempty"`
	BuriedAt    *time.Time      `json:"buried_at,omitempty"`
	LastError   string          `json:"last_error,omitempty"`
	Key         string          `json:"key,omitempty"`
	RequestID   string          `json:"request_id,omitempty"`
	TraceParent string          `json:"traceparent,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

func toRecordJSON(r outbox.Record, now time.Time, payload bool) RecordJSON {
	j := RecordJSON{ID: r.ID, Topic: r.Topic, State: r.State(now), Attempts: r.Attempts,
		CreatedAt: r.CreatedAt, LastError: r.LastError, Key: r.Key,
		RequestID: r.Origin.RequestID, TraceParent: r.Origin.TraceParent}
	if r.BuriedAt.IsZero() {
		j.DueAt = &r.DueAt
	} else {
		j.BuriedAt = &r.BuriedAt
	}
	if payload {
		j.Payload = redactPayload(r.Payload)
	}
	return j
}

// secretFields are the payload fields `app outbox show` never prints: a
// mail's one-time code, and tokens or secrets of any topic.
var secretFields = map[string]bool{"code": true, "token": true, "secret": true, "password": true}

// redactPayload returns the JSON payload with the values of secret fields,
// and the code of any link, replaced by "REDACTED".
func redactPayload(payload []byte) json.RawMessage {
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return json.RawMessage(`"(not JSON)"`)
	}
	out, err := json.Marshal(redact(v))
	if err != nil {
		return json.RawMessage(`"(not shown)"`)
	}
	return out
}

func redact(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if secretFields[k] {
				v[k] = "REDACTED"
				continue
			}
			v[k] = redact(x)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = redact(x)
		}
		return v
	case string:
		if u, err := neturl.Parse(v); err == nil && u.Scheme != "" && u.RawQuery != "" {
			q := u.Query()
			for k := range q {
				if secretFields[k] {
					q.Set(k, "REDACTED")
				}
			}
			u.RawQuery = q.Encode()
			return u.String()
		}
		return v
	default:
		return v
	}
}
