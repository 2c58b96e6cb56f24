package kafkabroker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eventsourced/accounts/internal/loopback"
	"github.com/eventsourced/accounts/internal/publish/kafkabroker"
)

const topic = "accounts.events"

// bundle is what most tests need: a cluster and a publisher to it.
type bundle struct {
	cluster *kfake.Cluster
	pub     *kafkabroker.Publisher
}

// setup starts a kfake cluster with opts and a publisher to it, both
// closed when t ends.
func setup(t *testing.T, opts ...kfake.Opt) bundle {
	t.Helper()
	cluster := newCluster(t, opts...)
	return bundle{cluster: cluster, pub: newPublisher(t, cluster.ListenAddrs()...)}
}

func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(cluster.Close)
	return cluster
}

func newPublisher(t testing.TB, brokers ...string) *kafkabroker.Publisher {
	t.Helper()
	pub, err := kafkabroker.New(kafkabroker.Config{Brokers: brokers})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := pub.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return pub
}

// newMessage returns a message with key as its [kafkabroker.MetadataKey]
// (none if key is empty) and the given context.
func newMessage(ctx context.Context, key string, payload []byte) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), payload)
	if key != "" {
		msg.Metadata.Set(kafkabroker.MetadataKey, key)
	}
	msg.SetContext(ctx)
	return msg
}

// testContext returns a context that ends at the test's deadline or after
// limit, whichever is first.
func testContext(t *testing.T, limit time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	t.Cleanup(cancel)
	return ctx
}

// consume reads topic from the start with a client of its own until done
// says it has all it needs, or fails the test once ctx ends.
func consume(ctx context.Context, t *testing.T, brokers []string, done func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for !done(recs) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume: got %d records before %v", len(recs), ctx.Err())
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			t.Logf("consume %s/%d: %v", topic, partition, err)
		})
		recs = append(recs, fetches.Records()...)
	}
	return recs
}

// hasIDs returns a condition of [consume] that holds once every message in
// msgs has a record.
func hasIDs(msgs []*message.Message) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		seen := make(map[string]bool, len(recs))
		for _, r := range recs {
			seen[headerID(r)] = true
		}
		for _, m := range msgs {
			if !seen[m.UUID] {
				return false
			}
		}
		return true
	}
}

func headerID(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == kafkabroker.HeaderID {
			return string(h.Value)
		}
	}
	return ""
}

// freePort returns a loopback port that nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := loopback.Port() // kept by a cluster started again on it
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// publishFails publishes a message for key under a context that ends
// after wait, checks that Publish fails at that deadline, and returns the
// message.
func publishFails(t *testing.T, pub *kafkabroker.Publisher, key string, wait time.Duration) *message.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	msg := newMessage(ctx, key, []byte("while unreachable/"+key))
	start := time.Now()
	err := pub.Publish(topic, msg)
	took := time.Since(start)
	t.Logf("Publish while unreachable: %v after %v", err, took.Round(time.Millisecond))
	if err == nil {
		t.Fatal("Publish succeeded while the cluster was unreachable")
	}
	if !strings.Contains(err.Error(), msg.UUID) {
		t.Errorf("error %q does not name message %s", err, msg.UUID)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the message context's deadline", err)
	}
	if limit := wait + time.Second; took > limit {
		t.Errorf("Publish took %v, want it to fail within %v of its %v deadline", took, limit-wait, wait)
	}
	return msg
}

// publishEventually publishes each of msgs in turn, as the outbox relay
// retries a message, under a short deadline per try and for at most limit in
// all. A first try can fail even once the cluster is back: a record given
// up on at its deadline still sits in the client until the client notices,
// and records queued behind it in its partition fail with it.
func publishEventually(t *testing.T, pub *kafkabroker.Publisher, limit time.Duration, msgs ...*message.Message) {
	t.Helper()
	all, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	for _, msg := range msgs {
		for tries := 1; ; tries++ {
			ctx, cancelTry := context.WithTimeout(all, 2*time.Second)
			msg.SetContext(ctx)
			start := time.Now()
			err := pub.Publish(topic, msg)
			took := time.Since(start).Round(time.Millisecond)
			cancelTry()
			if err == nil {
				t.Logf("Publish of %s succeeded on try %d after %v", msg.UUID, tries, took)
				break
			}
			t.Logf("Publish of %s, try %d: %v after %v", msg.UUID, tries, err, took)
			if all.Err() != nil {
				t.Fatalf("Publish still failing after %v (%d tries): %v", limit, tries, err)
			}
		}
	}
}

// publishRound publishes one message per key, one Publish each, and returns
// them.
func publishRound(ctx context.Context, t *testing.T, pub *kafkabroker.Publisher, keys []string, label string) []*message.Message {
	t.Helper()
	var msgs []*message.Message
	for _, key := range keys {
		m := newMessage(ctx, key, []byte(label+"/"+key))
		if err := pub.Publish(topic, m); err != nil {
			t.Fatalf("Publish %s: %v", label, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// checkDelivered checks that every message in want has a record, and that
// for each key the first records of these messages come in the order of
// want. Other records (an earlier try of a message that failed but whose
// request the cluster stored) may sit between them.
func checkDelivered(t *testing.T, recs []*kgo.Record, want []*message.Message) {
	t.Helper()
	wanted := make(map[string]bool, len(want))
	for _, m := range want {
		wanted[m.UUID] = true
	}
	got := make(map[string][]string)
	seen := make(map[string]bool)
	for _, r := range recs {
		id := headerID(r)
		if wanted[id] && !seen[id] {
			seen[id] = true
			got[string(r.Key)] = append(got[string(r.Key)], id)
		}
	}
	wantByKey := make(map[string][]string)
	for _, m := range want {
		key := m.Metadata.Get(kafkabroker.MetadataKey)
		wantByKey[key] = append(wantByKey[key], m.UUID)
	}
	for key, ids := range wantByKey {
		if !slices.Equal(got[key], ids) {
			t.Errorf("key %s: consumed %q, want %q", key, got[key], ids)
		}
	}
}

// TestCloseGivesUpRecordsPastTheirDeadline checks that a record whose
// request is in flight to a cluster that never answers leaves the client
// soon after its deadline instead of holding its partition (and Close)
// until an answer comes.
func TestCloseGivesUpRecordsPastTheirDeadline(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	pub, err := kafkabroker.New(kafkabroker.Config{Brokers: cluster.ListenAddrs()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	publishRound(testContext(t, 20*time.Second), t, pub, []string{"a"}, "before")
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return nil, errors.New("response lost"), true
	})
	publishFails(t, pub, "a", time.Second)

	start := time.Now()
	err = pub.Close()
	took := time.Since(start)
	t.Logf("Close: %v after %v", err, took.Round(time.Millisecond))
	if err != nil {
		t.Errorf("Close: %v", err)
	}
	if limit := 5 * time.Second; took > limit {
		t.Errorf("Close took %v, want the expired record given up within %v", took, limit)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		brokers []string
		wantErr string // empty for a valid config
	}{
		{"one broker", []string{"localhost:9092"}, ""},
		{"several brokers", []string{"kafka-1:9092", "10.0.0.2:9093", "[::1]:9094"}, ""},
		{"nil list", nil, "no brokers"},
		{"empty list", []string{}, "no brokers"},
		{"empty address", []string{""}, `broker "" is not host:port`},
		{"no port", []string{"localhost"}, `broker "localhost" is not host:port`},
		{"no host", []string{":9092"}, `broker ":9092" has no host`},
		{"named port", []string{"localhost:kafka"}, `broker "localhost:kafka" has no valid port`},
		{"port zero", []string{"localhost:0"}, `broker "localhost:0" has no valid port`},
		{"port too large", []string{"localhost:65536"}, `broker "localhost:65536" has no valid port`},
		{"url", []string{"kafka://localhost:9092"}, `broker "kafka://localhost:9092" is not host:port`},
		{"one bad of two", []string{"localhost:9092", "localhost"}, `broker "localhost" is not host:port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := kafkabroker.Config{Brokers: tt.brokers}
			err := cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Validate: no error, want one containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Validate: %v, want it to contain %q", err, tt.wantErr)
			}

			pub, err := kafkabroker.New(cfg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := pub.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func BenchmarkPublish(b *testing.B) {
	const keys = 64
	cluster, err := kfake.NewCluster(kfake.SeedTopics(16, topic), kfake.BlackholeProduce())
	if err != nil {
		b.Fatalf("kfake: %v", err)
	}
	b.Cleanup(cluster.Close)
	pub := newPublisher(b, cluster.ListenAddrs()...)
	payload := bytes.Repeat([]byte(`{"account":"0190a1b2","amount":1234},`), 11)[:400]
	ctx := b.Context()
	if err := pub.Publish(topic, newMessage(ctx, "warm-up", payload)); err != nil {
		b.Fatalf("Publish: %v", err)
	}

	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			msg := newMessage(ctx, "account-"+strconv.Itoa(i%keys), payload)
			if err := pub.Publish(topic, msg); err != nil {
				b.Errorf("Publish: %v", err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// TestPublish holds the publisher to what a Kafka consumer relies on, and
// to the relay's deadlines while the cluster is away or slow.
func TestPublish(t *testing.T) {
	t.Parallel()
	t.Run("a record carries key, headers and payload", testPublishRecordCarriesKeyHeadersAndPayload)
	t.Run("idempotent with acks from all in-sync replicas", testPublishIsIdempotentWithAllISRAcks)
	t.Run("each key in one partition, in order", testPublishKeepsEachKeyInOnePartitionInOrder)
	t.Run("fails while the cluster is down and recovers", testPublishFailsWhileClusterIsDownAndRecovers)
	t.Run("works once the cluster starts late", testPublishWorksOnceClusterStartsLate)
	t.Run("honours the deadline when responses are lost", testPublishHonoursDeadlineWhenResponsesAreLost)
	t.Run("after close fails", testPublishAfterCloseFails)
}

func testPublishRecordCarriesKeyHeadersAndPayload(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, topic))
	ctx := testContext(t, 20*time.Second)

	payload := []byte{0, 1, 2, 0xff, '{', '}', 0xfe, 0}
	keyed := newMessage(ctx, "account-7", payload)
	keyed.Metadata.Set("zeta", "last")
	keyed.Metadata.Set("alpha", "first")
	keyed.Metadata.Set("empty", "")
	keyed.Metadata.Set(kafkabroker.HeaderID, "spoofed")
	unkeyed := newMessage(ctx, "", []byte("no key"))
	unkeyed.Metadata.Set("trace", "abc")

	if err := b.pub.Publish(topic, keyed, unkeyed); err != nil {
		t.Fatalf("Publish: %v", err)
	}

	recs := consume(ctx, t, b.cluster.ListenAddrs(), hasIDs([]*message.Message{keyed, unkeyed}))
	if len(recs) != 2 {
		t.Fatalf("got %d records, want 2", len(recs))
	}
	byID := map[string]*kgo.Record{headerID(recs[0]): recs[0], headerID(recs[1]): recs[1]}

	tests := []struct {
		msg     *message.Message
		key     []byte
		headers []kgo.RecordHeader
	}{
		{
			msg: keyed,
			key: []byte("account-7"),
			headers: []kgo.RecordHeader{
				{Key: "id", Value: []byte(keyed.UUID)},
				{Key: "alpha", Value: []byte("first")},
				{Key: "empty", Value: []byte{}},
				{Key: "zeta", Value: []byte("last")},
			},
		},
		{
			msg: unkeyed,
			key: nil,
			headers: []kgo.RecordHeader{
				{Key: "id", Value: []byte(unkeyed.UUID)},
				{Key: "trace", Value: []byte("abc")},
			},
		},
	}
	for _, tt := range tests {
		r := byID[tt.msg.UUID]
		if r.Topic != topic {
			t.Errorf("%s: topic %q, want %q", tt.msg.UUID, r.Topic, topic)
		}
		if (r.Key == nil) != (tt.key == nil) || !bytes.Equal(r.Key, tt.key) {
			t.Errorf("%s: key %q (nil %t), want %q (nil %t)", tt.msg.UUID, r.Key, r.Key == nil, tt.key, tt.key == nil)
		}
		if !bytes.Equal(r.Value, tt.msg.Payload) {
			t.Errorf("%s: value %x, want %x", tt.msg.UUID, r.Value, tt.msg.Payload)
		}
		if !slices.EqualFunc(r.Headers, tt.headers, func(a, b kgo.RecordHeader) bool {
			return a.Key == b.Key && bytes.Equal(a.Value, b.Value)
		}) {
			t.Errorf("%s: headers %q, want %q", tt.msg.UUID, r.Headers, tt.headers)
		}
	}
}

// testPublishIsIdempotentWithAllISRAcks looks at the produce requests the
// cluster receives, so that a change of the producer's settings shows.
func testPublishIsIdempotentWithAllISRAcks(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t, kfake.SeedTopics(1, topic))
	type seen struct {
		acks       int16
		producerID int64
	}
	var (
		mu   sync.Mutex
		reqs []seen
	)
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		produce := req.(*kmsg.ProduceRequest)
		for _, tp := range produce.Topics {
			for _, p := range tp.Partitions {
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(p.Records); err != nil {
					t.Errorf("record batch: %v", err)
					continue
				}
				mu.Lock()
				reqs = append(reqs, seen{produce.Acks, batch.ProducerID})
				mu.Unlock()
			}
		}
		return nil, nil, false // observe only: the cluster handles it
	})
	pub := newPublisher(t, cluster.ListenAddrs()...)

	if err := pub.Publish(topic, newMessage(testContext(t, 20*time.Second), "k", []byte("v"))); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) == 0 {
		t.Fatal("cluster saw no produce request")
	}
	for _, r := range reqs {
		if r.acks != -1 {
			t.Errorf("acks %d, want -1 (all in-sync replicas)", r.acks)
		}
		if r.producerID < 0 {
			t.Errorf("producer ID %d, want one from InitProducerID (idempotent)", r.producerID)
		}
	}
}

func testPublishKeepsEachKeyInOnePartitionInOrder(t *testing.T) {
	t.Parallel()
	const (
		partitions = 8
		keys       = 16
		rounds     = 5
	)
	b := setup(t, kfake.SeedTopics(partitions, topic))
	ctx := testContext(t, 30*time.Second)

	var sent []*message.Message
	seq := func(m *message.Message) string { return m.Metadata.Get("seq") }
	next := func(key string, round int) *message.Message {
		m := newMessage(ctx, key, []byte(key+"/"+strconv.Itoa(round)))
		m.Metadata.Set("seq", strconv.Itoa(round))
		sent = append(sent, m)
		return m
	}
	// Keys interleaved, one message per Publish, then one Publish of a
	// message per key, then one per key from a second client, which must
	// hash keys to the same partitions.
	for round := range rounds {
		for k := range keys {
			if err := b.pub.Publish(topic, next(fmt.Sprintf("account-%d", k), round)); err != nil {
				t.Fatalf("Publish: %v", err)
			}
		}
	}
	var batch []*message.Message
	for k := range keys {
		batch = append(batch, next(fmt.Sprintf("account-%d", k), rounds))
	}
	if err := b.pub.Publish(topic, batch...); err != nil {
		t.Fatalf("Publish batch: %v", err)
	}
	other := newPublisher(t, b.cluster.ListenAddrs()...)
	for k := range keys {
		if err := other.Publish(topic, next(fmt.Sprintf("account-%d", k), rounds+1)); err != nil {
			t.Fatalf("Publish from second client: %v", err)
		}
	}

	recs := consume(ctx, t, b.cluster.ListenAddrs(), hasIDs(sent))
	if len(recs) != len(sent) {
		t.Fatalf("got %d records, want %d", len(recs), len(sent))
	}
	partitionOf := make(map[string]int32)
	order := make(map[string][]string)
	used := make(map[int32]bool)
	for _, r := range recs {
		key := string(r.Key)
		if p, ok := partitionOf[key]; ok && p != r.Partition {
			t.Errorf("key %s in partitions %d and %d", key, p, r.Partition)
		}
		partitionOf[key] = r.Partition
		used[r.Partition] = true
		order[key] = append(order[key], string(r.Value))
	}
	if len(used) < 2 {
		t.Errorf("%d keys landed in %d partition(s) of %d, want a spread", keys, len(used), partitions)
	}
	for k := range keys {
		key := fmt.Sprintf("account-%d", k)
		var want []string
		for _, m := range sent {
			if m.Metadata.Get(kafkabroker.MetadataKey) == key {
				want = append(want, key+"/"+seq(m))
			}
		}
		if !slices.Equal(order[key], want) {
			t.Errorf("key %s consumed in order %q, want %q", key, order[key], want)
		}
	}
}

// testPublishFailsWhileClusterIsDownAndRecovers stops the cluster, so its
// port refuses connections, and starts a new one on the same port from the
// same data directory, as a broker restart does.
func testPublishFailsWhileClusterIsDownAndRecovers(t *testing.T) {
	t.Parallel()
	port, dir := freePort(t), t.TempDir()
	opts := []kfake.Opt{kfake.Ports(port), kfake.DataDir(dir), kfake.SeedTopics(4, topic)}
	first := newCluster(t, opts...)
	brokers := first.ListenAddrs()
	pub := newPublisher(t, brokers...)
	ctx := testContext(t, 60*time.Second)
	keys := []string{"a", "b", "c", "d", "e", "f"}

	before := publishRound(ctx, t, pub, keys, "before")
	first.Close()

	failed := []*message.Message{
		publishFails(t, pub, "a", time.Second),
		publishFails(t, pub, "b", time.Second),
	}

	second := newCluster(t, opts...)
	if got := second.ListenAddrs(); !slices.Equal(got, brokers) {
		t.Fatalf("restarted cluster listens on %v, want %v", got, brokers)
	}
	publishEventually(t, pub, 30*time.Second, failed...)
	after := publishRound(ctx, t, pub, keys, "after")

	want := slices.Concat(before, failed, after)
	checkDelivered(t, consume(ctx, t, brokers, hasIDs(want)), want)
}

// testPublishWorksOnceClusterStartsLate starts the publisher before there is
// any cluster, as an application does whose broker is down at start.
func testPublishWorksOnceClusterStartsLate(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	brokers := []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	pub := newPublisher(t, brokers...)

	failed := publishFails(t, pub, "a", time.Second)

	newCluster(t, kfake.Ports(port), kfake.SeedTopics(2, topic))
	publishEventually(t, pub, 30*time.Second, failed)
	ctx := testContext(t, 30*time.Second)
	after := publishRound(ctx, t, pub, []string{"a", "b"}, "after")

	want := append([]*message.Message{failed}, after...)
	checkDelivered(t, consume(ctx, t, brokers, hasIDs(want)), want)
}

// testPublishHonoursDeadlineWhenResponsesAreLost has the cluster read
// produce requests and drop the connection instead of answering, so the
// client cannot know whether the record was stored: Publish must still
// fail at the message's deadline rather than retry until an answer comes.
func testPublishHonoursDeadlineWhenResponsesAreLost(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	ctx := testContext(t, 60*time.Second)

	before := publishRound(ctx, t, b.pub, []string{"a", "b"}, "before")

	var (
		mu   sync.Mutex
		lose = true
	)
	errLost := errors.New("response lost")
	b.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if !lose {
			return nil, nil, false
		}
		b.cluster.KeepControl()
		return nil, errLost, true // closes the connection unanswered
	})

	failed := publishFails(t, b.pub, "a", time.Second)

	mu.Lock()
	lose = false
	mu.Unlock()
	publishEventually(t, b.pub, 30*time.Second, failed)
	after := publishRound(ctx, t, b.pub, []string{"a", "b"}, "after")

	want := slices.Concat(before, []*message.Message{failed}, after)
	checkDelivered(t, consume(ctx, t, b.cluster.ListenAddrs(), hasIDs(want)), want)
}

func testPublishAfterCloseFails(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t, kfake.SeedTopics(1, topic))
	pub, err := kafkabroker.New(kafkabroker.Config{Brokers: cluster.ListenAddrs()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := pub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := pub.Publish(topic, newMessage(testContext(t, 10*time.Second), "k", nil)); !errors.Is(err, kgo.ErrClientClosed) {
		t.Errorf("Publish after Close: %v, want %v", err, kgo.ErrClientClosed)
	}
}
