package projections

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventsourced/accounts/internal/eventstore"
)

// Metadata keys by which a [Log]'s messages tell their place in the batch
// their subscriber read.
const (
	// MetadataSubscriber names the subscriber that read the message.
	MetadataSubscriber = "subscriber"
	// MetadataBatchEnd is the position ([FormatPosition]) of the last
	// event of the message's batch: the window of the log its subscriber
	// read. The message of that event, of the group's types or passing,
	// is the batch's last.
	MetadataBatchEnd = "batch_end"
	// MetadataPassing marks, with "true", the last event a subscriber read
	// for a batch when it is not of the group's types: it is not applied,
	// but the group's offset moves to it, so that a projection of rare
	// types does not read the same stretch of other events again and again.
	MetadataPassing = "passing"
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

// Batches holds back the events of each subscriber's batch until its last
// message, so that a backend's [Log] applies a batch in one go: one
// savepoint, one call of the projection, one move of the offset, instead of
// all three for every event. The events held back are acknowledged to the
// subscriber; since the offset moves only when they are applied, a batch
// that its subscriber commits before its last message (it stopped, or gave
// up waiting) leaves them to be delivered again, never lost and never
// applied twice.
type Batches struct {
	mu      sync.Mutex
	pending map[string]*pendingBatch
	// read holds, per subscriber, the events of the batch it read last,
	// by ID, so that Apply need not decode them from their messages.
	read map[string]readBatch
}

type readBatch struct {
	end    string
	events map[string]eventstore.Event
}

type pendingBatch struct {
	// tx is the subscriber transaction the events were read in.
	tx     any
	events []eventstore.Event
	// through is the position the batch read up to: its last event, or a
	// passing one after it.
	through eventstore.Position
	// passing is whether through is a passing event's.
	passing bool
}

// Read notes e, read by subscriber sub in the batch that ends at end
// ([MetadataBatchEnd]), so that Apply takes it as it is instead of
// decoding it from its message. A backend's schema adapter calls it as it
// turns rows into messages; another end starts another batch.
func (b *Batches) Read(sub, end string, e eventstore.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.read == nil {
		b.read = make(map[string]readBatch)
	}
	r := b.read[sub]
	if r.end != end || r.events == nil {
		r = readBatch{end: end, events: make(map[string]eventstore.Event)}
		b.read[sub] = r
	}
	r.events[e.ID.String()] = e
}

// event returns the event of msg: as read, when Read noted it, or else
// decoded from the message.
func (b *Batches) event(msg *message.Message, sub, end string) (eventstore.Event, error) {
	b.mu.Lock()
	r := b.read[sub]
	b.mu.Unlock()
	if e, ok := r.events[msg.UUID]; ok && r.end == end {
		return e, nil
	}
	return EventFromMessage(msg)
}

// Apply holds back msg's event, read in the subscriber transaction tx, and,
// when msg is the last of its batch, calls flush with every event held back
// for its subscriber, in order, and the position the group's offset is to
// move to: the last event's, or that of a passing event after it
// ([MetadataPassing]), which is not among events, and which may be all
// there is. When flush fails it calls it again with one event at a time,
// so that the events before the one that fails are applied and that one's
// error is returned as an [*EventError]; the rest stay held, for the
// message to be handed over again.
func (b *Batches) Apply(msg *message.Message, tx any, flush func(events []eventstore.Event, through eventstore.Position) error) error {
	end := msg.Metadata.Get(MetadataBatchEnd)
	if _, err := ParsePosition(end); err != nil {
		return fmt.Errorf("projections: message %s has no batch end: %w", msg.UUID, err)
	}
	sub := msg.Metadata.Get(MetadataSubscriber)
	e, err := b.event(msg, sub, end)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if b.pending == nil {
		b.pending = make(map[string]*pendingBatch)
	}
	p := b.pending[sub]
	if p == nil || p.tx != tx {
		// A new batch: what an earlier one held back was not applied, and
		// comes again after its offset.
		p = &pendingBatch{tx: tx}
		b.pending[sub] = p
	}
	if msg.Metadata.Get(MetadataPassing) == "true" {
		p.through, p.passing = e.Position, true
	} else if n := len(p.events); n == 0 || p.events[n-1].ID != e.ID {
		p.events = append(p.events, e)
		p.through = e.Position
	}
	events, through, passing := p.events, p.through, p.passing
	b.mu.Unlock()
	if FormatPosition(e.Position) != end {
		return nil
	}
	err = flush(events, through)
	if err == nil || len(events) == 0 {
		if err == nil {
			b.forget(sub, p)
		}
		return err
	}
	for i, ev := range events {
		if err := flush(events[i:i+1], ev.Position); err != nil {
			b.mu.Lock()
			p.events = events[i:]
			b.mu.Unlock()
			var already *EventError
			if errors.As(err, &already) {
				return err
			}
			return &EventError{Event: ev, Err: err}
		}
	}
	if passing {
		if err := flush(nil, through); err != nil {
			b.mu.Lock()
			p.events = nil
			b.mu.Unlock()
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
