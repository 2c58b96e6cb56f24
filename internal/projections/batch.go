package projections

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
)

// Metadata keys by which a [Log]'s messages tell the batch they carry.
const (
	// MetadataSubscriber names the subscriber that read the message.
	MetadataSubscriber = "subscriber"
	// MetadataBatchEnd is the position ([FormatPosition]) of the last event
	// of the window of the log that the batch covers, of the group's types
	// or not: the group's offset moves there once the batch is applied.
	MetadataBatchEnd = "batch_end"
)

// EventError is the error of applying one event, which a batch that failed
// as a whole found by applying its events one at a time.
type EventError struct {
	Event eventstore.Event
	Err   error
}

func (e *EventError) Error() string {
	return fmt.Sprintf("projections: apply event %s at %s: %v", e.Event.ID, FormatPosition(e.Event.Position), e.Err)
}

func (e *EventError) Unwrap() error { return e.Err }

// BatchEvent is one event of a batch's payload, as a backend's log reads
// it: a JSON object with one-letter keys, so that the database builds the
// array of a whole batch and the subscriber reads one row per batch.
type BatchEvent struct {
	// Commit is the event's Position.Commit, as text (PostgreSQL's xid8
	// does not fit a JSON number), or empty for 0.
	Commit   string          `json:"c,omitempty"`
	Seq      int64           `json:"p"`
	ID       uuid.UUID       `json:"i"`
	Stream   string          `json:"s"`
	Version  int64           `json:"v"`
	Type     string          `json:"y"`
	Data     json.RawMessage `json:"d"`
	Metadata json.RawMessage `json:"m"`
	// RecordedAt is in microseconds since the Unix epoch.
	RecordedAt int64 `json:"r"`
}

// DecodeBatch returns the events of a batch's payload: a JSON array of
// [BatchEvent], in log order.
func DecodeBatch(payload []byte) ([]eventstore.Event, error) {
	var raw []BatchEvent
	if err := json.Unmarshal(payload, &raw); err != nil {
		return nil, fmt.Errorf("projections: batch: %w", err)
	}
	events := make([]eventstore.Event, len(raw))
	for i, r := range raw {
		e := eventstore.Event{ID: r.ID, Stream: r.Stream, Version: r.Version, Type: r.Type, Data: []byte(r.Data),
			RecordedAt: time.UnixMicro(r.RecordedAt).UTC(), Position: eventstore.Position{Seq: r.Seq}}
		if r.Commit != "" {
			c, err := strconv.ParseUint(r.Commit, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("projections: batch: event %s: commit %q: %w", r.ID, r.Commit, err)
			}
			e.Position.Commit = c
		}
		if len(r.Metadata) > 0 && string(r.Metadata) != "{}" {
			if err := json.Unmarshal(r.Metadata, &e.Metadata); err != nil {
				return nil, fmt.Errorf("projections: batch: event %s metadata: %w", r.ID, err)
			}
		}
		events[i] = e
	}
	return events, nil
}

// BatchMessage returns the message of a batch that subscriber sub read for
// group, from a window of the log that ends at end: payload is a JSON array
// of [BatchEvent] of the group's types, or nil when the backend hands the
// events to [Batches.Read] alone.
func BatchMessage(group, sub string, end eventstore.Position, payload []byte) *message.Message {
	m := message.NewMessage(group+"@"+FormatPosition(end), payload)
	m.Metadata.Set(MetadataGroup, group)
	m.Metadata.Set(MetadataSubscriber, sub)
	m.Metadata.Set(MetadataBatchEnd, FormatPosition(end))
	return m
}

// Batches applies the batches a backend's [Log] delivers, one message per
// window of the log: one savepoint, one call of the projection and one move
// of the offset per batch, and, when the batch fails, one of each per event
// up to the one that fails. It remembers, per subscriber, how far a batch
// handed over again in the same transaction has come, so that no event is
// applied twice in it.
type Batches struct {
	mu      sync.Mutex
	pending map[string]*pendingBatch
	// read holds the events of the last batch each subscriber read, as the
	// backend decoded them, so that Apply need not decode them again.
	read map[string]readBatch
}

type readBatch struct {
	id     string
	events []eventstore.Event
}

type pendingBatch struct {
	// tx is the subscriber transaction the batch was read in, and id the
	// batch's message.
	tx any
	id string
	// rest are the events not applied yet.
	rest []eventstore.Event
}

// Read notes the events of the batch message id that subscriber sub read,
// so that Apply takes them as they are.
func (b *Batches) Read(sub, id string, events []eventstore.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.read == nil {
		b.read = make(map[string]readBatch)
	}
	b.read[sub] = readBatch{id: id, events: events}
}

// Apply applies the batch msg carries, read in the subscriber transaction
// tx: it calls flush with the events not applied yet and the window's end,
// where the group's offset is to move. When flush fails it calls it again
// with one event at a time (and that event's position), so that the events
// before the one that fails are applied and that one's error is returned
// as an [*EventError]; the rest wait for the message to be handed over
// again. A batch of no event moves the offset alone.
func (b *Batches) Apply(msg *message.Message, tx any, flush func(events []eventstore.Event, through eventstore.Position) error) error {
	end, err := ParsePosition(msg.Metadata.Get(MetadataBatchEnd))
	if err != nil {
		return fmt.Errorf("projections: message %s has no batch end: %w", msg.UUID, err)
	}
	sub := msg.Metadata.Get(MetadataSubscriber)
	b.mu.Lock()
	if b.pending == nil {
		b.pending = make(map[string]*pendingBatch)
	}
	p := b.pending[sub]
	fresh := p == nil || p.tx != tx || p.id != msg.UUID
	var read readBatch
	if fresh {
		read = b.read[sub]
	}
	b.mu.Unlock()
	if fresh {
		events := read.events
		if read.id != msg.UUID {
			if len(msg.Payload) == 0 {
				return fmt.Errorf("projections: batch %s was not read through these Batches, and its message carries no events", msg.UUID)
			}
			if events, err = DecodeBatch(msg.Payload); err != nil {
				return err
			}
		}
		p = &pendingBatch{tx: tx, id: msg.UUID, rest: events}
		b.mu.Lock()
		b.pending[sub] = p
		b.mu.Unlock()
	}
	rest := p.rest
	if err := flush(rest, end); err == nil || len(rest) == 0 {
		if err == nil {
			b.forget(sub, p)
		}
		return err
	}
	for i, ev := range rest {
		if err := flush(rest[i:i+1], ev.Position); err != nil {
			p.rest = rest[i:]
			var already *EventError
			if errors.As(err, &already) {
				return err
			}
			return &EventError{Event: ev, Err: err}
		}
	}
	p.rest = nil
	if rest[len(rest)-1].Position != end {
		if err := flush(nil, end); err != nil {
			return err
		}
	}
	b.forget(sub, p)
	return nil
}

// forget drops the batch p of sub once applied.
func (b *Batches) forget(sub string, p *pendingBatch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[sub] == p {
		delete(b.pending, sub)
	}
}
