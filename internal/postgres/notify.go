package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyGap is the least time between the starts of two notifications of
// one [notifier]: a burst of commits costs a NOTIFY every few milliseconds
// at most, and a relay in another process hears of a commit at most about
// this much later than it would with one NOTIFY per commit.
const notifyGap = 5 * time.Millisecond

// notifier tells the relays of other processes that units of work of its
// DB committed outbox messages, by NOTIFY on a connection of its own.
//
// A unit of work that ran pg_notify itself would commit under the lock
// that PostgreSQL takes to queue notifications, one commit at a time across
// the whole server, and so cap the rate of commits. Instead, after each
// such commit, the unit of work calls [notifier.notify], which never waits,
// and one goroutine sends the notifications: at most one at a time, and
// after one, another if any commit asked meanwhile, so that every commit
// has a notification sent after it. A burst of commits thus costs a few
// notifications, not one each.
//
// A notification that cannot be sent is logged and dropped; the next
// commit tries again, on a new connection, and relays poll meanwhile.
type notifier struct {
	channel string
	// id is the payload of the notifications, by which the listeners of
	// the same DB tell them apart: its relays were woken in process.
	id     string
	config *pgx.ConnConfig
	log    *slog.Logger
	// kick holds a request for a notification, made after a commit.
	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
	// asked counts the requests, for tests.
	asked atomic.Int64
	// beforeSend, when set before the first request, runs before each
	// notification is sent; for tests.
	beforeSend func()
}

// newNotifier starts a notifier that sends on channel over connections
// made from config.
func newNotifier(config *pgx.ConnConfig, channel string, log *slog.Logger) *notifier {
	config = config.Copy()
	config.RuntimeParams["application_name"] = "outbox-notify"
	ctx, stop := context.WithCancel(context.Background())
	n := &notifier{
		channel: channel,
		id:      rand.Text(),
		config:  config,
		log:     log,
		kick:    make(chan struct{}, 1),
		stop:    stop,
		done:    make(chan struct{}),
	}
	go n.run(ctx)
	return n
}

// notify asks for a notification to be sent after this call. It never
// waits: a request that finds another waiting joins it.
func (n *notifier) notify() {
	n.asked.Add(1)
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// close stops the notifier and closes its connection.
func (n *notifier) close() {
	n.stop()
	<-n.done
}

func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = conn.Close(closeCtx)
		}
	}()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		if wait := notifyGap - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		// The notification below comes after every request made until now.
		select {
		case <-n.kick:
		default:
		}
		last = time.Now()
		var err error
		conn, err = n.send(ctx, conn)
		if err != nil && ctx.Err() == nil {
			n.log.WarnContext(ctx, "outbox: notify relays of other processes; they poll until a notification gets through",
				"channel", n.channel, "error", err)
		}
	}
}

// send sends one notification on conn, or on a new connection when conn is
// nil or fails: a connection kept from an earlier notification may have
// broken since, when the server restarted or ended its backend. It returns
// the connection to use next time, nil after a failure.
func (n *notifier) send(ctx context.Context, conn *pgx.Conn) (*pgx.Conn, error) {
	if n.beforeSend != nil {
		n.beforeSend()
	}
	for kept := conn != nil; ; kept = false {
		if conn == nil {
			var err error
			if conn, err = pgx.ConnectConfig(ctx, n.config); err != nil {
				return nil, fmt.Errorf("connect: %w", err)
			}
		}
		_, err := conn.Exec(ctx, `SELECT pg_notify($1, $2)`, n.channel, n.id)
		if err == nil {
			return conn, nil
		}
		_ = conn.Close(ctx)
		conn = nil
		if !kept {
			return nil, err
		}
	}
}
