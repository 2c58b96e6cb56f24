package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/soak"
)

// TestSoakLosesNothing runs a short soak: three instances of this binary
// (acting as the app) under load, an instance killed every 12 seconds,
// PostgreSQL restarted once and the SMTP server refusing mail now and then;
// the ledger must balance. It needs postgresql-common and nats-server, and
// fails without them.
func TestSoakLosesNothing(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	picture := filepath.Join(dir, "soak.svg")
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := soak.Run(ctx, soak.Config{
		Binary:            exe,
		Env:               []string{asAppEnv + "=1"},
		Dir:               dir,
		Duration:          50 * time.Second,
		Workers:           8,
		Rate:              10,
		KillEvery:         12 * time.Second,
		RestartPostgresAt: 25 * time.Second,
		SMTPOutageEvery:   10 * time.Second,
		SMTPOutageFor:     2 * time.Second,
		SampleEvery:       2 * time.Second,
		DrainBurst:        100,
		MailWait:          2 * time.Minute,
		Picture:           picture,
		Log:               &log,
	})
	if res != nil {
		var out bytes.Buffer
		printSoak(&out, soak.Config{Picture: picture}, res)
		t.Logf("soak:\n%s\n%s", log.String(), out.String())
	}
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, log.String())
	}
	if res.Kills < 3 || res.PostgresRestart != 1 || res.SMTPOutages < 3 {
		t.Errorf("faults: %d kills, %d PostgreSQL restarts, %d SMTP outages; want at least 3, 1, 3", res.Kills, res.PostgresRestart, res.SMTPOutages)
	}
	if res.MailsExpected < 100 || res.Events < 100 || res.Deleted < 10 {
		t.Errorf("too little load to tell: %d mails, %d events, %d deletions", res.MailsExpected, res.Events, res.Deleted)
	}
	b, err := os.ReadFile(picture)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "<svg ") || !strings.Contains(string(b), "<path d=\"M") {
		t.Errorf("the picture is not an SVG with lines: %.200s", b)
	}
}
