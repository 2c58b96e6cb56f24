package viewstest

import (
	"bytes"
	"context"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// The golden fixtures: the data of every version of every event type the
// domain has ever stored, one file each, named TYPE.vVERSION.json. An
// event once stored is a contract forever, so a file here is never
// edited; a new shape of a type is a new version, with a new file.
//
//go:embed testdata/events/*.json
var fixtureFiles embed.FS

// fixtureStory puts every fixture in the order of one account's life, so
// that each applies to the views as it would in a log: the streams it is
// appended to, and what the views must show after it.
var fixtureStory = []struct {
	file   string
	stream string
}{
	{"signin.link_requested.v1.json", "signin-fixture"},
	{"signin.link_used.v1.json", "signin-fixture"},
	{"signin.link_requested.v2.json", "signin-fixture"},
	{"user.registered.v1.json", "user-" + fixtureUser.String()},
	{"user.session_started.v1.json", "user-" + fixtureUser.String()},
	{"user.session_started.v2.json", "user-" + fixtureUser.String()},
	{"user.email_change_requested.v1.json", "user-" + fixtureUser.String()},
	{"user.email_changed.v1.json", "user-" + fixtureUser.String()},
	{"user.email_change_undone.v1.json", "user-" + fixtureUser.String()},
	{"user.session_ended.v1.json", "user-" + fixtureUser.String()},
	{"user.session_ended.v2.json", "user-" + fixtureUser.String()},
	{"signin.forgotten.v1.json", "signin-fixture"},
	{"user.erased.v1.json", "user-" + fixtureUser.String()},
}

// fixtureUser is the account of the fixtures.
var fixtureUser = uuid.MustParse("0190a3b1-0000-7000-8000-00000000a0a0")

// fixture reads the file name of the fixtures: the type and version its
// name gives, and its data.
func fixture(t *testing.T, name string) (typ string, version int, data []byte) {
	t.Helper()
	base, ok := strings.CutSuffix(name, ".json")
	i := strings.LastIndex(base, ".v")
	if !ok || i < 0 {
		t.Fatalf("fixture %s is not named TYPE.vVERSION.json", name)
	}
	version, err := strconv.Atoi(base[i+2:])
	if err != nil || version < 1 {
		t.Fatalf("fixture %s is not named TYPE.vVERSION.json", name)
	}
	data, err = fs.ReadFile(fixtureFiles, path.Join("testdata/events", name))
	if err != nil {
		t.Fatal(err)
	}
	return base[:i], version, bytes.TrimSpace(data)
}

// testFixturesCoverEveryVersion: there is a fixture of every version of
// every registered type, no other, and the story tells each once.
func testFixturesCoverEveryVersion(t *testing.T, _ *suite) {
	entries, err := fs.ReadDir(fixtureFiles, "testdata/events")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, e := range entries {
		typ, version, _ := fixture(t, e.Name())
		if v := user.Events().Version(typ); version > v {
			t.Errorf("fixture %s: %s is registered at version %d", e.Name(), typ, v)
		}
		files[e.Name()] = true
	}
	for _, typ := range user.Events().Types() {
		for v := 1; v <= user.Events().Version(typ); v++ {
			if name := fmt.Sprintf("%s.v%d.json", typ, v); !files[name] {
				t.Errorf("no fixture of %s version %d: add %s under testdata/events", typ, v, name)
			}
		}
	}
	told := map[string]bool{}
	for _, step := range fixtureStory {
		if told[step.file] || !files[step.file] {
			t.Errorf("the story tells %s twice, or a file that is not there", step.file)
		}
		told[step.file] = true
	}
	if len(told) != len(files) {
		t.Errorf("the story tells %d fixtures of %d", len(told), len(files))
	}
}

// testFixturesLoadAndApply appends each fixture as it was stored, at its
// version, reads it back from the log, upcasts and decodes it, and applies
// it to the views and the activity, checking what each shows after it.
func testFixturesLoadAndApply(t *testing.T, s *suite) {
	const ada, adaNew = "ada@example.com", "ada.new@example.com"
	// What the views show after each fixture, given its fields.
	want := map[string]func(d map[string]any){
		"signin.link_requested.v1.json": func(d map[string]any) { s.wantSignInCode(t, "the fixture's link", str(d["code_hash"]), ada) },
		"signin.link_used.v1.json":      func(d map[string]any) { s.wantNoSignInCode(t, "the fixture's used link", str(d["code_hash"])) },
		"signin.link_requested.v2.json": func(d map[string]any) { s.wantSignInCode(t, "the fixture's link", str(d["code_hash"]), ada) },
		"user.registered.v1.json": func(map[string]any) {
			s.wantUser(t, user.User{ID: fixtureUser, Email: ada, CreatedAt: s.clock.Now()})
		},
		// A session's account is its stream's from version 2 on.
		"user.session_started.v1.json": func(d map[string]any) {
			s.wantSession(t, "the fixture's session", str(d["token_hash"]), fixtureUser, time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC))
		},
		"user.session_started.v2.json": func(d map[string]any) {
			s.wantSession(t, "the fixture's session", hexOfBase64(t, d["token_hash"]), fixtureUser, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
		},
		"user.email_change_requested.v1.json": func(d map[string]any) {
			s.wantEmailChangeCode(t, "the fixture's change", str(d["code_hash"]), fixtureUser)
		},
		"user.email_changed.v1.json": func(d map[string]any) {
			s.wantNoEmailChangeCode(t, "the fixture's confirmed change", str(d["code_hash"]))
			s.wantUserEmail(t, fixtureUser, adaNew)
		},
		"user.email_change_undone.v1.json": func(map[string]any) { s.wantUserEmail(t, fixtureUser, ada) },
		"user.session_ended.v1.json": func(d map[string]any) {
			s.wantNoSession(t, "the fixture's ended session", str(d["token_hash"]))
		},
		"user.session_ended.v2.json": func(d map[string]any) {
			s.wantNoSession(t, "the fixture's ended session", hexOfBase64(t, d["token_hash"]))
		},
		"signin.forgotten.v1.json": func(map[string]any) {},
		"user.erased.v1.json":      func(map[string]any) { s.wantNoUser(t, fixtureUser) },
	}
	wantActivity := map[string]string{
		"user.registered.v1.json":             user.ActivityRegistered,
		"user.session_started.v1.json":        user.ActivitySignedIn,
		"user.session_started.v2.json":        user.ActivitySignedIn,
		"user.email_change_requested.v1.json": user.ActivityEmailChangeRequested,
		"user.email_changed.v1.json":          user.ActivityEmailChanged + " " + adaNew,
		"user.email_change_undone.v1.json":    user.ActivityEmailChangeUndone + " " + ada,
		"user.session_ended.v1.json":          user.ActivitySessionEnded + " " + user.EndedByUndo,
		"user.session_ended.v2.json":          user.ActivitySignedOut,
	}
	for _, step := range fixtureStory {
		typ, version, data := fixture(t, step.file)
		var fields map[string]any
		if err := json.Unmarshal(data, &fields); err != nil {
			t.Fatalf("fixture %s: %v", step.file, err)
		}
		e := eventstore.Event{ID: uuid.New(), Type: typ, Data: data, SchemaVersion: version}
		var stored eventstore.Event
		s.do(t, func(ctx context.Context, tx uow.Tx) error {
			if _, err := s.Events.Append(ctx, tx, step.stream, eventstore.Any, e); err != nil {
				return err
			}
			events, err := s.Events.Load(ctx, tx, step.stream, 0)
			if err != nil {
				return err
			}
			stored = events[len(events)-1]
			return s.projection.Apply(ctx, tx, stored)
		})
		if stored.ID != e.ID || stored.SchemaVersion != version || !jsonEqual(stored.Data, data) {
			t.Errorf("fixture %s came back from the log as %s at version %d: %s", step.file, stored.ID, stored.SchemaVersion, stored.Data)
		}
		if _, err := user.Events().Decode(stored); err != nil {
			t.Errorf("fixture %s: %v", step.file, err)
		}
		want[step.file](fields)
		// Version 1 of a link request left its time to the envelope;
		// the upcaster takes it from there.
		if typ == user.TypeSignInLinkRequested {
			d, err := user.Decode[user.SignInLinkRequested](stored)
			wantAt := stored.RecordedAt
			if version > 1 {
				wantAt, _ = time.Parse(time.RFC3339, str(fields["requested_at"]))
			}
			if err != nil || !d.RequestedAt.Equal(wantAt) {
				t.Errorf("fixture %s: requested at %s (%v), want %s", step.file, d.RequestedAt, err, wantAt)
			}
		}
		s.read(t, func(ctx context.Context, tx uow.Tx) error {
			id, a, ok, err := user.ActivityOf(ctx, tx, s.Keys, stored)
			if err != nil {
				return fmt.Errorf("fixture %s: %w", step.file, err)
			}
			got := strings.TrimSpace(a.Type + " " + a.Detail)
			if w := wantActivity[step.file]; got != w || ok != (w != "") || (ok && id != fixtureUser) {
				t.Errorf("fixture %s: activity %q of %s (%v), want %q", step.file, got, id, ok, w)
			}
			return nil
		})
	}
}

// hexOfBase64 returns in hex, as the views key a session by, the bytes
// that v, a token hash in base64, holds.
func hexOfBase64(t *testing.T, v any) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(str(v))
	if err != nil || len(b) != 32 {
		t.Fatalf("token hash %v: %d bytes, %v; want 32 in base64", v, len(b), err)
	}
	return hex.EncodeToString(b)
}

// str returns v as a string, "" when it is none.
func str(v any) string {
	s, _ := v.(string)
	return s
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// wantUserEmail checks that the user with id holds email.
func (s *suite) wantUserEmail(t *testing.T, id uuid.UUID, email string) {
	t.Helper()
	if got, ok := s.userByID(t, id); !ok || got.Email != email {
		t.Errorf("User(%s) = %s, want it at %s", id, showUser(got, ok), email)
	}
}
