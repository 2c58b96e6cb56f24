package outbox

import (
	"context"
	"errors"
)

// Handler delivers one message. Returning an error makes the relay retry
// the message later.
type Handler func(ctx context.Context, m Message) error

// ErrPermanent, wrapped in a [Handler]'s error, says that the message can
// never be delivered: its destination refused it for good (a mail server
// that knows no such mailbox), or it cannot be read. The relay buries it
// at once; an operator can still requeue it.
var ErrPermanent = errors.New("outbox: permanent failure")
