package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
)

// Outbox does the work of `app outbox ...` on Store, printing what it did
// to Out, and to Err what it waits for.
type Outbox struct {
	Store outbox.Operator
	Out   io.Writer
	Err   io.Writer
}

// List prints the messages that f admits, as a table or JSON lines.
func (o Outbox) List(ctx context.Context, f outbox.ListFilter, asJSON bool) error {
	out := o.Out
	f.Now = time.Now()
	recs, err := o.Store.List(ctx, f)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		for _, r := range recs {
			if err := enc.Encode(toRecordJSON(r, f.Now, false)); err != nil {
				return err
			}
		}
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTOPIC\tSTATE\tATTEMPTS\tDUE\tLAST ERROR")
	for _, r := range recs {
		// A buried message is due never, until it is requeued.
		due := "-"
		if r.BuriedAt.IsZero() {
			due = r.DueAt.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Topic, r.State(f.Now), r.Attempts, due, r.LastError)
	}
	return w.Flush()
}

// Show prints one message with its payload, secrets redacted, as a table
// or a JSON object.
func (o Outbox) Show(ctx context.Context, id uuid.UUID, asJSON bool) error {
	out := o.Out
	r, err := o.Store.Lookup(ctx, id)
	if err != nil {
		return err
	}
	j := toRecordJSON(r, time.Now(), true)
	if asJSON {
		return json.NewEncoder(out).Encode(j)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "id\t%s\ntopic\t%s\nstate\t%s\nattempts\t%d\ncreated\t%s\n",
		j.ID, j.Topic, j.State, j.Attempts, j.CreatedAt.Format(time.RFC3339Nano))
	if j.DueAt != nil {
		fmt.Fprintf(w, "due\t%s\n", j.DueAt.Format(time.RFC3339Nano))
	}
	if j.BuriedAt != nil {
		fmt.Fprintf(w, "buried\t%s\n", j.BuriedAt.Format(time.RFC3339Nano))
	}
	if j.Key != "" {
		fmt.Fprintf(w, "key\t%s\n", j.Key)
	}
	if j.LastError != "" {
		fmt.Fprintf(w, "last error\t%s\n", j.LastError)
	}
	if j.RequestID != "" {
		fmt.Fprintf(w, "request id\t%s\n", j.RequestID)
	}
	if j.TraceParent != "" {
		fmt.Fprintf(w, "traceparent\t%s\n", j.TraceParent)
	}
	fmt.Fprintf(w, "payload\t%s\n", j.Payload)
	return w.Flush()
}

// Buried prints up to limit buried messages with their reasons.
func (o Outbox) Buried(ctx context.Context, limit int) error {
	buried, err := o.Store.Buried(ctx, limit)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTOPIC\tATTEMPTS\tBURIED\tREASON")
	for _, b := range buried {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", b.ID, b.Topic, b.Attempts, b.BuriedAt.Format("2006-01-02T15:04:05Z"), b.LastError)
	}
	return w.Flush()
}

// Requeue makes buried messages due again now: those named by ID, or with
// all every buried one. A message named that is not buried is left as it
// is, with an error wrapping [outbox.ErrNotBuried] that says its state,
// and one that is not there an error wrapping [outbox.ErrNotFound]; the
// others are requeued.
func (o Outbox) Requeue(ctx context.Context, ids []uuid.UUID, all bool) error {
	if all {
		buried, err := o.Store.Buried(ctx, math.MaxInt32)
		if err != nil {
			return err
		}
		for _, b := range buried {
			ids = append(ids, b.ID)
		}
	}
	now := time.Now()
	var errs []error
	n := 0
	for _, id := range ids {
		if err := o.Store.Requeue(ctx, id, now); err != nil {
			errs = append(errs, o.whyNotRequeued(ctx, id, err))
			continue
		}
		n++
	}
	if len(errs) == 0 {
		fmt.Fprintf(o.Out, "requeued %d\n", n)
		return nil
	}
	fmt.Fprintf(o.Out, "requeued %d of %d messages\n", n, len(ids))
	return errors.Join(errs...)
}

// whyNotRequeued returns err, the store's error for a message it did not
// requeue, or, when that message is there but not buried, an error that
// says so: the store tells the two apart by neither.
func (o Outbox) whyNotRequeued(ctx context.Context, id uuid.UUID, err error) error {
	if !errors.Is(err, outbox.ErrNotFound) {
		return err
	}
	r, lerr := o.Store.Lookup(ctx, id)
	if lerr != nil {
		return err
	}
	return fmt.Errorf("outbox: requeue %s: %w: it is %s (only a buried message is requeued; one still to deliver is delivered as it is)",
		id, outbox.ErrNotBuried, r.State(time.Now()))
}

// Discarded names the buried messages to discard: those of IDs, or with
// Buried every one of Topic (every topic when empty) buried longer ago
// than OlderThan.
type Discarded struct {
	IDs       []uuid.UUID
	Buried    bool
	Topic     string
	OlderThan time.Duration
}

// Discard deletes the buried messages that d names. A message of d.IDs
// still to deliver is kept, and an error wrapping [outbox.ErrNotBuried].
func (o Outbox) Discard(ctx context.Context, d Discarded) error {
	if d.Buried {
		n, err := o.Store.DiscardBuried(ctx, d.Topic, time.Now().Add(-d.OlderThan))
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "discarded %d buried messages\n", n)
		return nil
	}
	var errs []error
	n := 0
	for _, id := range d.IDs {
		if err := o.Store.Discard(ctx, id); err != nil {
			if errors.Is(err, outbox.ErrNotBuried) {
				err = fmt.Errorf("%w (only a buried message can be discarded: one still to deliver is never thrown away)", err)
			}
			errs = append(errs, err)
			continue
		}
		n++
	}
	fmt.Fprintf(o.Out, "discarded %d of %d messages\n", n, len(d.IDs))
	return errors.Join(errs...)
}

// Drain delivers what is due now in one synchronous pass of relay and
// prints what became of it. Deliveries still running past their timeout
// are waited for as long as lease, since their messages are leased anyway;
// it says so on Err. Store is not used.
func (o Outbox) Drain(ctx context.Context, rel *relay.Relay, lease time.Duration) error {
	out, stderr := o.Out, o.Err
	stats, err := rel.Drain(ctx)
	if stats.Running > 0 {
		fmt.Fprintf(stderr, "waiting for %d deliveries still running past their timeout\n", stats.Running)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease)
		if werr := rel.Wait(wctx); werr != nil {
			fmt.Fprintf(stderr, "stopped waiting: %v; their messages are due again when their leases end\n", werr)
		}
		cancel()
	}
	fmt.Fprintf(out, "claimed %d, delivered %d, retried %d, buried %d\n", stats.Claimed, stats.Delivered, stats.Retried, stats.Buried)
	return err
}
