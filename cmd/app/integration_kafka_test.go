package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eventsourced/accounts/internal/loopback"
	"github.com/eventsourced/accounts/internal/org"
	orgintegration "github.com/eventsourced/accounts/internal/org/integration"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/schemas"
)

// kafkaCluster starts a kfake cluster with the topics accounts.user and
// accounts.org of 8 partitions, on port, keeping its data in dir so that
// it can be started again.
func kafkaCluster(t *testing.T, port int, dir string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir), kfake.SeedTopics(8, "accounts.user", "accounts.org"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// loopbackPort returns a loopback port that nothing listens on, kept by a
// cluster started again on it.
func loopbackPort(t *testing.T) int {
	t.Helper()
	port, err := loopback.Port()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// kafkaEvents consumes topic from its start until it has n records.
func kafkaEvents(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), e2eWait)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records of %d", len(recs), n)
		}
		recs = append(recs, f.Records()...)
	}
	return recs
}

// testKafkaKeepsEachUsersEventsInOnePartitionInOrder publishes the events
// of several users, and of their organizations, to a cluster that goes
// away while commands run and comes back: nothing is lost; each record is
// keyed by its subject, the user or the organization, carries the event's
// id in a header and matches its schema; the users' events are in
// accounts.user, the organizations' in accounts.org; and each subject's
// events are in one partition, in the order of their versions.
func testKafkaKeepsEachUsersEventsInOnePartitionInOrder(t *testing.T) {
	t.Parallel()
	port, dir := loopbackPort(t), t.TempDir()
	cluster := kafkaCluster(t, port, dir)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	b := newIntegrationBench(t, map[string]string{"BROKER_URL": "kafka://" + addr, "BASE_URL": "http://accounts.test"})

	emails := []string{"ada@example.com", "grace@example.com", "edsger@example.com", "barbara@example.com", "donald@example.com"}
	var users []user.Session
	for _, e := range emails {
		users = append(users, b.signIn(t, e))
	}
	ada, grace, edsger, barbara := users[0], users[1], users[2], users[3]
	engines, err := b.orgs.Create(t.Context(), ada.Token, "Engines")
	if err != nil {
		t.Fatal(err)
	}
	b.join(t, ada.Token, engines.ID, grace, org.RoleMember)
	compilers, err := b.orgs.Create(t.Context(), edsger.Token, "Compilers")
	if err != nil {
		t.Fatal(err)
	}
	b.drainUntilDelivered(t, 2*len(emails)+3)

	cluster.Close()
	for _, e := range emails {
		b.signIn(t, e) // a second sign-in: version 3
	}
	if _, err := b.orgs.ChangeRole(t.Context(), ada.Token, engines.ID, grace.User.ID, org.RoleOwner); err != nil {
		t.Fatal(err)
	}
	b.join(t, edsger.Token, compilers.ID, barbara, org.RoleMember)
	ctx, cancel := context.WithTimeout(t.Context(), e2eWait)
	stats, err := b.relay.Drain(ctx)
	cancel()
	if err != nil || stats.Delivered != 0 || stats.Retried == 0 {
		t.Fatalf("drain with the cluster down: %+v, %v; want retries", stats, err)
	}
	kafkaCluster(t, port, dir)
	b.clock.Advance(time.Hour)
	b.drainUntilDelivered(t, len(emails)+2)

	types, last, partition := kafkaRecords(t, kafkaEvents(t, addr, "accounts.user", 3*len(emails)))
	if len(last) != len(emails) {
		t.Errorf("records of %d users, want %d", len(last), len(emails))
	}
	for id, v := range last {
		if v != 3 {
			t.Errorf("last version of %s is %v, want 3", id, v)
		}
	}
	spread := map[int32]bool{}
	for _, p := range partition {
		spread[p] = true
	}
	if len(spread) < 2 {
		t.Errorf("%d users in %d partition, want them spread", len(emails), len(spread))
	}
	for _, typs := range types {
		for _, typ := range typs {
			if !strings.HasPrefix(integration.Route(typ), "user.") {
				t.Errorf("%s in accounts.user", typ)
			}
		}
	}

	types, last, _ = kafkaRecords(t, kafkaEvents(t, addr, "accounts.org", 5))
	for id, want := range map[string]struct {
		types []string
		last  float64
	}{
		engines.ID.String():   {[]string{orgintegration.TypeMemberAdded, orgintegration.TypeMemberAdded, orgintegration.TypeRoleChanged}, 6},
		compilers.ID.String(): {[]string{orgintegration.TypeMemberAdded, orgintegration.TypeMemberAdded}, 5},
	} {
		if !slices.Equal(types[id], want.types) || last[id] != want.last {
			t.Errorf("accounts.org holds %v up to version %v about %s, want %v up to %v", types[id], last[id], id, want.types, want.last)
		}
	}
	if len(types) != 2 {
		t.Errorf("accounts.org holds events about %d subjects, want the two organizations", len(types))
	}
}

// kafkaRecords checks records, each against its schema, its key (the
// event's subject), its headers, and their subjects' order: each
// subject's in one partition, in the order of their versions, none
// twice. It returns the types of each subject's events in order, the
// last version of each, and its partition.
func kafkaRecords(t *testing.T, recs []*kgo.Record) (types map[string][]string, last map[string]float64, partition map[string]int32) {
	t.Helper()
	types, last, partition = map[string][]string{}, map[string]float64{}, map[string]int32{}
	seen := map[string]bool{}
	for _, r := range recs {
		var e publish.CloudEvent
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		if err := schemas.Check(r.Value); err != nil {
			t.Errorf("record at %d/%d does not match its schema: %v", r.Partition, r.Offset, err)
		}
		if string(r.Key) != e.Subject {
			t.Errorf("record of %s keyed %q", e.Subject, r.Key)
		}
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		if headers["id"] != e.ID || headers["content-type"] != publish.ContentType {
			t.Errorf("record of event %s has headers %v", e.ID, headers)
		}
		if seen[e.ID] {
			t.Errorf("event %s published twice", e.ID)
		}
		seen[e.ID] = true
		if p, ok := partition[e.Subject]; ok && p != r.Partition {
			t.Errorf("events of %s in partitions %d and %d", e.Subject, p, r.Partition)
		}
		partition[e.Subject] = r.Partition
		var data struct{ Version float64 }
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.Version <= last[e.Subject] {
			t.Errorf("%s of %s at version %v after %v", e.Type, e.Subject, data.Version, last[e.Subject])
		}
		last[e.Subject] = data.Version
		types[e.Subject] = append(types[e.Subject], e.Type)
	}
	return types, last, partition
}
