//go:build !linux

package main

import (
	"os"
	"testing"
)

// terminal is a pseudo-terminal for a test, on Linux only.
type terminal struct{ TTY *os.File }

func openTerminal(t *testing.T) *terminal {
	t.Skip("the tests open pseudo-terminals on Linux only")
	return nil
}

func (*terminal) String() string { return "" }
