package main

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// terminal is a pseudo-terminal for a test: the app writes to TTY, as to
// the terminal of a person who runs it, and String returns what the
// screen shows.
type terminal struct {
	TTY    *os.File
	mu     sync.Mutex
	screen bytes.Buffer
}

// openTerminal opens a pseudo-terminal, closed when t ends.
func openTerminal(t *testing.T) *terminal {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("pseudo-terminal: %v", err)
	}
	var unlock int32
	var n uint32
	if err := ioctl(ptmx, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatalf("pseudo-terminal: unlock: %v", err)
	}
	if err := ioctl(ptmx, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatalf("pseudo-terminal: number: %v", err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("pseudo-terminal: %v", err)
	}
	term := &terminal{TTY: tty}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			term.mu.Lock()
			term.screen.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = tty.Close()
		_ = ptmx.Close()
		<-done
	})
	return term
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// String returns what the terminal has shown so far.
func (term *terminal) String() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.screen.String()
}
