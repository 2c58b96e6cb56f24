package user

import (
	"os"
	"path/filepath"
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
