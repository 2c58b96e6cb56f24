package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamName is the stream the instances publish to (BROKER_SUBJECT_PREFIX
// left at accounts.).
const streamName = "ACCOUNTS"

// brokerEvent is one integration event read from the stream.
type brokerEvent struct {
	id, typ string
	version int
}

// brokerReader reads the stream from its start, as a consumer would, and
// keeps each user's events in the stream's order, a repeated id once.
type brokerReader struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	cc   jetstream.ConsumeContext
	mu   sync.Mutex
	seen map[string]bool
	// byUser holds each user's events in stream order.
	byUser    map[string][]brokerEvent
	repeats   int
	malformed []string
	lastSeq   uint64
	total     int
	arrived   chan struct{}
}

func readBroker(ctx context.Context, url string) (*brokerReader, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("soak: connect to NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("soak: %w", err)
	}
	b := &brokerReader{nc: nc, js: js, seen: map[string]bool{}, byUser: map[string][]brokerEvent{}, arrived: make(chan struct{})}
	// The instances make the stream at their start.
	wait, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var stream jetstream.Stream
	for {
		if stream, err = js.Stream(wait, streamName); err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) || pause(wait, 200*time.Millisecond) != nil {
			nc.Close()
			return nil, fmt.Errorf("soak: the stream %s: %w", streamName, err)
		}
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("soak: consumer of %s: %w", streamName, err)
	}
	if b.cc, err = cons.Consume(b.receive); err != nil {
		nc.Close()
		return nil, fmt.Errorf("soak: consume %s: %w", streamName, err)
	}
	return b, nil
}

func (b *brokerReader) close() {
	b.cc.Stop()
	b.nc.Close()
}

func (b *brokerReader) receive(m jetstream.Msg) {
	var ce struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Subject string `json:"subject"`
		Data    struct {
			Version int `json:"version"`
		} `json:"data"`
	}
	err := json.Unmarshal(m.Data(), &ce)
	meta, _ := m.Metadata()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total++
	if meta != nil {
		b.lastSeq = meta.Sequence.Stream
	}
	if err != nil || ce.ID == "" || ce.Subject == "" {
		b.malformed = append(b.malformed, fmt.Sprintf("%.100s", m.Data()))
		return
	}
	if b.seen[ce.ID] {
		b.repeats++
		return
	}
	b.seen[ce.ID] = true
	b.byUser[ce.Subject] = append(b.byUser[ce.Subject], brokerEvent{id: ce.ID, typ: ce.Type, version: ce.Data.Version})
	close(b.arrived)
	b.arrived = make(chan struct{})
}

// waitFor waits until the stream holds n events of the user.
func (b *brokerReader) waitFor(ctx context.Context, user string, n int) error {
	for {
		b.mu.Lock()
		got, wait := len(b.byUser[user]), b.arrived
		b.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("the broker holds %d of the user's %d events: %w", got, n, ctx.Err())
		}
	}
}

// caughtUp tells whether the reader has read up to the stream's last
// message.
func (b *brokerReader) caughtUp(ctx context.Context) bool {
	s, err := b.js.Stream(ctx, streamName)
	if err != nil {
		return false
	}
	info, err := s.Info(ctx)
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastSeq >= info.State.LastSeq
}

func (b *brokerReader) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

// events returns each user's events and the repeats.
func (b *brokerReader) events() (map[string][]brokerEvent, int, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][]brokerEvent, len(b.byUser))
	for k, v := range b.byUser {
		out[k] = slicesClone(v)
	}
	return out, b.repeats, slicesClone(b.malformed)
}
