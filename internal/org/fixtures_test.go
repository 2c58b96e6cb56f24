package org

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
)

// fixtureDir holds the golden fixtures: the data of every version of
// every event type the domain has ever stored, one file each, named
// TYPE.vVERSION.json. An event once stored is a contract forever, so a
// file here is never edited; a new shape of a type is a new version, with
// an upcaster and a new file.
var fixtureDir = filepath.Join("testdata", "events")

// fixtureOrg is the organization whose stream the fixtures are appended
// to.
var fixtureOrg = uuid.MustParse("0190a3b2-0000-7000-8000-0000000000e0")

// readFixtures returns every fixture as an event of fixtureOrg's stream,
// by file name, at the version the name gives.
func readFixtures(t *testing.T) map[string]eventstore.Event {
	t.Helper()
	files, err := os.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]eventstore.Event{}
	for _, f := range files {
		base, ok := strings.CutSuffix(f.Name(), ".json")
		i := strings.LastIndex(base, ".v")
		if !ok || i < 0 {
			t.Fatalf("fixture %s is not named TYPE.vVERSION.json", f.Name())
		}
		version, err := strconv.Atoi(base[i+2:])
		if err != nil || version < 1 {
			t.Fatalf("fixture %s is not named TYPE.vVERSION.json", f.Name())
		}
		data, err := os.ReadFile(filepath.Join(fixtureDir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name()] = eventstore.Event{
			ID: uuid.New(), Stream: streamOf(fixtureOrg), Type: base[:i], Data: bytes.TrimSpace(data),
			SchemaVersion: version, Version: 1, RecordedAt: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC),
		}
	}
	return out
}

// TestFixturesCoverEveryVersion: there is a fixture of every version of
// every registered type, and of no other.
func TestFixturesCoverEveryVersion(t *testing.T) {
	fixtures := readFixtures(t)
	for name, e := range fixtures {
		if v := events.Version(e.Type); e.SchemaVersion > v {
			t.Errorf("fixture %s: %s is registered at version %d", name, e.Type, v)
		}
	}
	for _, typ := range events.Types() {
		for v := 1; v <= events.Version(typ); v++ {
			if name := fmt.Sprintf("%s.v%d.json", typ, v); fixtures[name].Type == "" {
				t.Errorf("no fixture of %s version %d: add %s under %s", typ, v, name, fixtureDir)
			}
		}
	}
}

// TestFixturesDecodeAsStored: each fixture of a type's current version
// decodes into the type's Go value and encodes back to the same JSON, so
// that a field renamed, retyped or dropped in the Go type, which would
// read the events stored before as something else, fails here; and each
// fixture folds and applies.
func TestFixturesDecodeAsStored(t *testing.T) {
	for name, e := range readFixtures(t) {
		d, err := events.Decode(e)
		if err != nil {
			t.Errorf("fixture %s: %v", name, err)
			continue
		}
		if e.SchemaVersion == events.Version(e.Type) {
			again, err := json.Marshal(d)
			if err != nil || !sameJSON(t, again, e.Data) {
				t.Errorf("fixture %s decodes to %+v, which encodes as %s (%v), want %s", name, d, again, err, e.Data)
			}
		}
		if _, err := orgFold.Evolve(newOrganization(fixtureOrg), e); err != nil {
			t.Errorf("fixture %s does not fold: %v", name, err)
		}
	}
}

// TestFixturesTellAStory folds the fixtures in the order of one
// organization's life, and checks the state after it.
func TestFixturesTellAStory(t *testing.T) {
	fixtures := readFixtures(t)
	story := []string{
		"org.created.v1.json",
		"org.invitation_sent.v1.json",
		"org.invitation_accepted.v1.json",
		"org.member_added.v1.json",
		"org.role_changed.v1.json",
		"org.invitation_revoked.v1.json",
		"org.invitation_voided.v1.json",
		"org.member_removed.v1.json",
	}
	var es []eventstore.Event
	for i, name := range story {
		e := fixtures[name]
		e.Version = int64(i + 1)
		es = append(es, e)
	}
	o, err := foldOrganization(fixtureOrg, es)
	if err != nil {
		t.Fatal(err)
	}
	ada, bob := uuid.MustParse("0190a3b1-0000-7000-8000-00000000a0a0"), uuid.MustParse("0190a3b1-0000-7000-8000-00000000b0b0")
	if !o.exists() || o.name != "Analytical Engines" || o.version != int64(len(story)) || len(o.invitations) != 0 || len(o.sent) != 1 {
		t.Errorf("after the story the state is %+v", o)
	}
	if _, ok := o.members[ada]; ok || o.members[bob].role != RoleOwner || o.members[bob].since != 4 {
		t.Errorf("after the story the members are %+v, want Bob alone, owner, since version 4", o.members)
	}
	e := fixtures["org.deleted.v1.json"]
	e.Version = int64(len(story) + 1)
	if o, err = orgFold.Evolve(o, e); err != nil || o.exists() || len(o.members) != 0 {
		t.Errorf("after the deletion the state is %+v (%v)", o, err)
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
