package operator

import (
	"context"
	"fmt"
	"io"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
)

// RotateKeys rewraps every data key with the current master key of keys,
// a page at a time, each page one unit of work of runner; afterwards the
// other master keys may go.
func RotateKeys(ctx context.Context, runner uow.Runner, keys *keyring.Keyring, out io.Writer) error {
	total := 0
	for {
		var n int
		if err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			var err error
			n, err = keys.Rotate(ctx, tx, 500)
			return err
		}); err != nil {
			return err
		}
		if n == 0 {
			break
		}
		total += n
	}
	_, err := fmt.Fprintf(out, "rewrapped %d data keys with master key %s\n", total, keys.CurrentMaster())
	return err
}
