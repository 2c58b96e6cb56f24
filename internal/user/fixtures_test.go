package user

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
)

// TestFixturesFold folds every golden fixture (viewstest/testdata/events),
// at the version it was stored with, through its aggregate's fold: each
// one upcasts, decodes and is handled. The suite in viewstest reads the
// same fixtures back from each backend and applies them to the
// projections.
func TestFixturesFold(t *testing.T) {
	dir := filepath.Join("viewstest", "testdata", "events")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no fixtures in %s", dir)
	}
	for _, f := range files {
		base := strings.TrimSuffix(f.Name(), ".json")
		i := strings.LastIndex(base, ".v")
		if i < 0 {
			t.Fatalf("fixture %s is not named TYPE.vVERSION.json", f.Name())
		}
		version, err := strconv.Atoi(base[i+2:])
		if err != nil {
			t.Fatalf("fixture %s is not named TYPE.vVERSION.json", f.Name())
		}
		data, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		e := eventstore.Event{ID: uuid.New(), Type: base[:i], Data: data, SchemaVersion: version, Version: 1}
		switch cat := eventstore.CategoryOf(e.Type); cat {
		case CategorySignIn:
			_, err = foldSignInLinks([]eventstore.Event{e}, 1)
		case CategoryUser:
			_, err = foldAccount([]eventstore.Event{e})
		default:
			t.Fatalf("fixture %s is of category %q, which no aggregate folds", f.Name(), cat)
		}
		if err != nil {
			t.Errorf("fixture %s: %v", f.Name(), err)
		}
	}
}

// TestUpcastSessionsV1: version 1 of each session event, as its fixture
// holds it, upcasts to the data version 2 stores: no user_id, which the
// stream names, and the same token hash in base64; a version 1 whose
// token hash is not the hex of 32 bytes is refused, never read as
// another session's.
func TestUpcastSessionsV1(t *testing.T) {
	const hexHash = "3c469e9d6c5875d37a43f353d4f88e61fcf812c66eee3457465a40b0da4153e0"
	const base64Hash = "PEaenWxYddN6Q/NT1PiOYfz4EsZu7jRXRlpAsNpBU+A="
	for _, c := range []struct{ typ, want string }{
		{TypeSessionStarted, `{"token_hash":"` + base64Hash + `","expires_at":"2026-01-31T00:00:00Z","client":"Firefox on Linux"}`},
		{TypeSessionEnded, `{"token_hash":"` + base64Hash + `","reason":"email_change_undone"}`},
	} {
		data, err := os.ReadFile(filepath.Join("viewstest", "testdata", "events", c.typ+".v1.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), hexHash) {
			t.Fatalf("the fixture of %s version 1 holds another hash than %s", c.typ, hexHash)
		}
		e := eventstore.Event{ID: uuid.New(), Stream: "user-0190a3b1-0000-7000-8000-00000000a0a0", Type: c.typ, Data: data, SchemaVersion: 1}
		up, err := events.Upcast(e)
		if err != nil || up.SchemaVersion != 2 || !sameJSON(t, up.Data, []byte(c.want)) {
			t.Errorf("%s version 1 upcast to version %d %s (%v), want version 2 %s", c.typ, up.SchemaVersion, up.Data, err, c.want)
		}
		for _, bad := range []string{"", "3C469E9D", strings.ToUpper(hexHash), hexHash[:62], hexHash + "00", "not hex"} {
			e.Data = []byte(`{"user_id":"0190a3b1-0000-7000-8000-00000000a0a0","token_hash":"` + bad + `"}`)
			if up, err := events.Upcast(e); err == nil {
				t.Errorf("%s version 1 with token hash %q upcast to %s, want an error", c.typ, bad, up.Data)
			}
		}
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
