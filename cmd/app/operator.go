package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	neturl "net/url"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
)

// recordJSON is a message as `app outbox list --json` and `show --json`
// print it.
type recordJSON struct {
	ID        uuid.UUID       `json:"id"`
	Topic     string          `json:"topic"`
	State     string          `json:"state"`
	Attempts  int             `json:"attempts"`
	CreatedAt time.Time       `json:"created_at"`
	DueAt     time.Time       `json:"due_at"`
	BuriedAt  *time.Time      `json:"buried_at,omitempty"`
	LastError string          `json:"last_error,omitempty"`
	Key       string          `json:"key,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
}

func toRecordJSON(r outbox.Record, now time.Time, payload bool) recordJSON {
	j := recordJSON{ID: r.ID, Topic: r.Topic, State: r.State(now), Attempts: r.Attempts,
		CreatedAt: r.CreatedAt, DueAt: r.DueAt, LastError: r.LastError, Key: r.Key}
	if !r.BuriedAt.IsZero() {
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

// existingDB loads the configuration and opens the database it names,
// which must exist, for the operators' commands.
func existingDB(ctx context.Context, getenv func(string) string, stderr io.Writer) (backend, error) {
	e, err := load(getenv, stderr)
	if err != nil {
		return nil, err
	}
	return e.openExistingDB(ctx)
}

// outboxList prints the messages that f admits, as a table or JSON lines.
func outboxList(ctx context.Context, getenv func(string) string, f outbox.ListFilter, asJSON bool, stdout, stderr io.Writer) error {
	db, err := existingDB(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	f.Now = time.Now()
	recs, err := db.Outbox().List(ctx, f)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range recs {
			if err := enc.Encode(toRecordJSON(r, f.Now, false)); err != nil {
				return err
			}
		}
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTOPIC\tSTATE\tATTEMPTS\tDUE\tLAST ERROR")
	for _, r := range recs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Topic, r.State(f.Now), r.Attempts, r.DueAt.Format(time.RFC3339), r.LastError)
	}
	return w.Flush()
}

// outboxShow prints one message with its payload, secrets redacted.
func outboxShow(ctx context.Context, getenv func(string) string, id uuid.UUID, asJSON bool, stdout, stderr io.Writer) error {
	db, err := existingDB(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := db.Outbox().Lookup(ctx, id)
	if err != nil {
		return err
	}
	j := toRecordJSON(r, time.Now(), true)
	if asJSON {
		return json.NewEncoder(stdout).Encode(j)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "id\t%s\ntopic\t%s\nstate\t%s\nattempts\t%d\ncreated\t%s\ndue\t%s\n",
		j.ID, j.Topic, j.State, j.Attempts, j.CreatedAt.Format(time.RFC3339Nano), j.DueAt.Format(time.RFC3339Nano))
	if j.BuriedAt != nil {
		fmt.Fprintf(w, "buried\t%s\n", j.BuriedAt.Format(time.RFC3339Nano))
	}
	if j.Key != "" {
		fmt.Fprintf(w, "key\t%s\n", j.Key)
	}
	if j.LastError != "" {
		fmt.Fprintf(w, "last error\t%s\n", j.LastError)
	}
	fmt.Fprintf(w, "payload\t%s\n", j.Payload)
	return w.Flush()
}

// outboxDiscard deletes buried messages: those named, or with buried every
// one of topic buried longer ago than olderThan.
func outboxDiscard(ctx context.Context, getenv func(string) string, ids []uuid.UUID, buried bool, topic string, olderThan time.Duration, stdout, stderr io.Writer) error {
	db, err := existingDB(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	store := db.Outbox()
	if buried {
		n, err := store.DiscardBuried(ctx, topic, time.Now().Add(-olderThan))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "discarded %d buried messages\n", n)
		return nil
	}
	var errs []error
	n := 0
	for _, id := range ids {
		if err := store.Discard(ctx, id); err != nil {
			if errors.Is(err, outbox.ErrNotBuried) {
				err = fmt.Errorf("%w (only a buried message can be discarded: one still to deliver is never thrown away)", err)
			}
			errs = append(errs, err)
			continue
		}
		n++
	}
	fmt.Fprintf(stdout, "discarded %d of %d messages\n", n, len(ids))
	return errors.Join(errs...)
}
