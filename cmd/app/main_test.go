package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// asAppEnv makes the test binary act as the app: tests that start
// instances as processes (the soak) run this binary, race detector and
// all, with the app's arguments.
const asAppEnv = "ACCOUNTS_TEST_BINARY_IS_APP"

func TestMain(m *testing.M) {
	if os.Getenv(asAppEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			os.Stderr.WriteString("app: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
