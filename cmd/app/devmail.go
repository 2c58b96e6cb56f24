package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/eventsourced/accounts/internal/smtp/mailbox"
)

// devmail is `app devmail`: a mail catcher on a loopback address that
// prints each mail it receives, so that the service can be tried with real
// SMTP on one machine: SMTP_URL=smtp://ADDR.
func devmail(ctx context.Context, addr string, stdout, stderr io.Writer) error {
	if err := mailbox.CheckLoopback(addr); err != nil {
		if errors.Is(err, mailbox.ErrNotLoopback) {
			err = fmt.Errorf("%w: devmail takes mail from anyone, for local use only", err)
		}
		return &usageError{fmt.Errorf("devmail: --addr %w", err)}
	}
	if err := mailbox.Catch(ctx, addr, stdout, stderr); err != nil {
		return fmt.Errorf("devmail: %w", err)
	}
	return nil
}
