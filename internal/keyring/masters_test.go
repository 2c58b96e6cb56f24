package keyring_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/keyring"
)

// DATA_KEY is one or more ID:KEY; a bad one is refused, and the error never
// shows a key.
func TestParseMasters(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("k", 43)
	m, err := keyring.ParseMasters("new:" + key + ", old:" + strings.Repeat("o", 42) + "w=")
	if err != nil || !slices.Equal(m.IDs(), []string{"new", "old"}) {
		t.Fatalf("ParseMasters: %v, %v; want new then old", m.IDs(), err)
	}
	for _, bad := range []string{"", key, "a:" + key + ",a:" + key, "A:" + key, "a b:" + key, "a:" + key[:40], "a:" + key + "xx", "a:!!!", strings.Repeat("x", 33) + ":" + key} {
		_, err := keyring.ParseMasters(bad)
		if err == nil {
			t.Errorf("ParseMasters(%q) accepted", bad)
		} else if strings.Contains(err.Error(), key[:20]) {
			t.Errorf("ParseMasters(%q): the error %q shows the key", bad, err)
		}
	}
	made, err := keyring.NewMasterKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := keyring.ParseMasters(made); err != nil || !slices.Equal(m.IDs(), []string{"k1"}) {
		t.Errorf("ParseMasters(NewMasterKey) = %v, %v", m.IDs(), err)
	}
}

// Without DATA_KEY a key file is made once, readable by its owner only,
// and read back after.
func TestKeyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "accounts.db.key")
	first, created, err := keyring.LoadOrCreateKeyFile(path)
	if err != nil || !created {
		t.Fatalf("first LoadOrCreateKeyFile: created %v, %v", created, err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, %v; want 0600", info.Mode().Perm(), err)
	}
	again, created, err := keyring.LoadOrCreateKeyFile(path)
	if err != nil || created || !slices.Equal(again.IDs(), first.IDs()) {
		t.Errorf("second LoadOrCreateKeyFile: %v, created %v, %v", again.IDs(), created, err)
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keyring.LoadOrCreateKeyFile(path); err == nil {
		t.Error("a garbled key file was taken")
	}
}

func TestPrefixEnd(t *testing.T) {
	for prefix, want := range map[string]string{
		"signin-": "signin.", "a": "b", "a\xff": "b", "\xff\xff": "", "": "",
	} {
		if got := keyring.PrefixEnd(prefix); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", prefix, got, want)
		}
	}
}
