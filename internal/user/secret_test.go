package user_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/user"
)

// A token hash reads the hex that the views key sessions by and gives it
// back, and goes to JSON as encoding/json writes 32 bytes: base64, which
// it reads back, refusing any other length.
func TestTokenHash(t *testing.T) {
	t.Parallel()
	const hexHash = "3c469e9d6c5875d37a43f353d4f88e61fcf812c66eee3457465a40b0da4153e0"
	h, err := user.ParseTokenHash(hexHash)
	if err != nil || h.Hex() != hexHash {
		t.Fatalf("ParseTokenHash(%s) = %s, %v", hexHash, h.Hex(), err)
	}
	got, err := json.Marshal(h)
	want, _ := json.Marshal(h[:])
	if err != nil || string(got) != string(want) || len(got) != 2+44 {
		t.Errorf("json.Marshal = %s, %v; want %s, as a []byte of it", got, err, want)
	}
	var back user.TokenHash
	if err := json.Unmarshal(got, &back); err != nil || back != h {
		t.Errorf("json.Unmarshal(%s) = %s, %v; want %s", got, back.Hex(), err, hexHash)
	}
	for _, bad := range []string{
		base64.StdEncoding.EncodeToString(h[:31]),
		base64.StdEncoding.EncodeToString(append(h[:], 0)),
		base64.RawStdEncoding.EncodeToString(h[:]) + "!",
		hexHash,
	} {
		if err := json.Unmarshal([]byte(`"`+bad+`"`), &back); err == nil {
			t.Errorf("json.Unmarshal(%q) = %s, want an error", bad, back.Hex())
		}
	}
	for _, bad := range []string{"", hexHash[:62], hexHash + "0", strings.ToUpper(hexHash), "g" + hexHash[1:]} {
		if h, err := user.ParseTokenHash(bad); err == nil {
			t.Errorf("ParseTokenHash(%q) = %s, want an error", bad, h.Hex())
		}
	}
}
