package async

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
)

// Metadata keys by which a [Log]'s messages tell the batch they carry.
const (
	// MetadataSubscriber names the subscriber that read the message.
	MetadataSubscriber = "subscriber"
	// MetadataBatchEnd is the position ([projections.FormatPosition]) of the
	// last event of the window of the log that the batch covers, of the
	// group's types or not: the group's offset moves there once the batch is
	// applied.
	MetadataBatchEnd = "batch_end"
)

// EventError is the error of applying one event, which a batch that failed
// as a whole found by applying its events one at a time.
type EventError struct {
	Event eventstore.Event
	Err   error
}

func (e *EventError) Error() string {
	return fmt.Sprintf("projections: apply event %s at %s: %v", e.Event.ID, projections.FormatPosition(e.Event.Position), e.Err)
}

func (e *EventError) Unwrap() error { return e.Err }

// BatchMessage returns the message of a batch that subscriber sub read for
// group, from a window of the log that ends at end. It carries no events:
// the backend hands them to [Batches.Read] as it reads them, and Apply
// takes them from there.
func BatchMessage(group, sub string, end eventstore.Position) *message.Message {
	m := message.NewMessage(group+"@"+projections.FormatPosition(end), nil)
	m.Metadata.Set(MetadataGroup, group)
	m.Metadata.Set(MetadataSubscriber, sub)
	m.Metadata.Set(MetadataBatchEnd, projections.FormatPosition(end))
	return m
}

// Batches applies the batches a backend's [Log] delivers, one message per
// window of the log: one savepoint, one call of the projection and one move
// of the offset per batch, and, when the batch fails, one of each per event
// up to the one that fails. It remembers, per subscriber, the batch read
// last and how far it has come in its transaction, so that a batch handed
// over again in the same transaction applies no event twice.
type Batches struct {
	mu   sync.Mutex
	last map[string]*batch
}

// batch is the batch a subscriber read last.
type batch struct {
	// id is the batch's message, events its events, rest those not
	// applied yet in tx, the subscriber transaction that applies them.
	id     string
	events []eventstore.Event
	rest   []eventstore.Event
	tx     any
}

// Read notes the events of the batch message id that subscriber sub read.
func (b *Batches) Read(sub, id string, events []eventstore.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		b.last = make(map[string]*batch)
	}
	b.last[sub] = &batch{id: id, events: events, rest: events}
}

// Apply applies the batch msg carries, read in the subscriber transaction
// tx: it calls flush with the events not applied yet and the window's end,
// where the group's offset is to move. When flush fails it calls it again
// with one event at a time (and that event's position), so that the events
// before the one that fails are applied and that one's error is returned
// as an [*EventError]; the rest wait for the message to be handed over
// again. A batch of no event moves the offset alone.
func (b *Batches) Apply(msg *message.Message, tx any, flush func(events []eventstore.Event, through eventstore.Position) error) error {
	end, err := projections.ParsePosition(msg.Metadata.Get(MetadataBatchEnd))
	if err != nil {
		return fmt.Errorf("projections: message %s has no batch end: %w", msg.UUID, err)
	}
	sub := msg.Metadata.Get(MetadataSubscriber)
	b.mu.Lock()
	p := b.last[sub]
	if p != nil && p.id == msg.UUID && p.tx != tx {
		// Read again, or handed over in another transaction: what an
		// earlier one applied did not commit with it.
		p.tx, p.rest = tx, p.events
	}
	b.mu.Unlock()
	if p == nil || p.id != msg.UUID {
		return fmt.Errorf("projections: batch %s was not read through these Batches", msg.UUID)
	}
	rest := p.rest
	if err := flush(rest, end); err == nil || len(rest) == 0 {
		if err == nil {
			p.rest = nil
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
		return flush(nil, end)
	}
	return nil
}
