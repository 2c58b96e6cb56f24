package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pooler says what stands between the app and PostgreSQL, and so how the
// app may use its connections.
//
// With [PoolerNone] each connection of the app is a server session of its
// own, and the settings of a connection (search_path from the URL, the
// relay's planner and commit settings) travel as startup parameters.
//
// A pooler such as PgBouncer forwards only a few startup parameters
// (application_name, client_encoding, DateStyle, TimeZone,
// standard_conforming_strings) and refuses the others. Behind one, the app
// sends only those, and applies every other setting itself:
//
//   - [PoolerSession]: a connection of the app keeps one server session
//     until it closes, and the pooler resets that session (DISCARD ALL)
//     before it serves another client. The app sets its settings with SET
//     once per connection; nothing else changes.
//   - [PoolerTransaction]: a connection of the app holds a server session
//     for one transaction only, and the next transaction may run on another
//     session that other clients used before. So the app keeps no state in
//     a session: its settings are set with set_config(..., true) (SET LOCAL)
//     inside each transaction, and a statement outside one goes in one
//     round trip with them, in the implicit transaction of a pipeline; it
//     prepares no named statement (pgx's exec mode, one round trip per
//     statement, parameters typed from their Go types); and it cannot
//     LISTEN through the pooler, so relays of other processes are woken
//     through a direct connection ([WithListenURL]) or poll.
//
// In every mode the migrations hold a transaction's advisory lock, never a
// session's (see [DB.Migrate]).
type Pooler string

const (
	// PoolerNone: the app connects to PostgreSQL itself.
	PoolerNone Pooler = "none"
	// PoolerSession: a pooler that gives each client connection a server
	// session until it closes (PgBouncer's pool_mode = session).
	PoolerSession Pooler = "session"
	// PoolerTransaction: a pooler that gives a client a server session for
	// one transaction (PgBouncer's pool_mode = transaction).
	PoolerTransaction Pooler = "transaction"
)

// ParsePooler reads a pooler mode: none (or empty), session or transaction.
func ParsePooler(s string) (Pooler, error) {
	switch p := Pooler(strings.ToLower(strings.TrimSpace(s))); p {
	case "", PoolerNone:
		return PoolerNone, nil
	case PoolerSession, PoolerTransaction:
		return p, nil
	default:
		return "", fmt.Errorf("postgres: pooler must be none, session or transaction, got %q", s)
	}
}

// forwarded are the startup parameters that PgBouncer passes on to the
// server (it tracks them per client); it refuses every other one.
var forwarded = map[string]bool{
	"application_name":            true,
	"client_encoding":             true,
	"datestyle":                   true,
	"timezone":                    true,
	"standard_conforming_strings": true,
}

// settings are run-time settings a connection needs, as one statement
// that sets them, for the session or for the transaction it runs in.
type settings struct {
	sql  string
	args []any
}

// newSettings returns the statement that sets params, sorted by name, for
// the transaction when local and for the session otherwise, or nil when
// there are none.
func newSettings(params map[string]string, local bool) *settings {
	if len(params) == 0 {
		return nil
	}
	var b strings.Builder
	s := &settings{}
	b.WriteString("SELECT ")
	for i, name := range slices.Sorted(maps.Keys(params)) {
		if i > 0 {
			b.WriteString(", ")
		}
		n := len(s.args)
		fmt.Fprintf(&b, "set_config($%d, $%d, %s)", n+1, n+2, strconv.FormatBool(local))
		s.args = append(s.args, name, params[name])
	}
	s.sql = b.String()
	return s
}

// takeSettings removes from cfg's startup parameters those a pooler would
// refuse, and returns them.
func takeSettings(cfg *pgx.ConnConfig) map[string]string {
	taken := map[string]string{}
	for name, value := range cfg.RuntimeParams {
		if !forwarded[strings.ToLower(name)] {
			taken[name] = value
			delete(cfg.RuntimeParams, name)
		}
	}
	return taken
}

// prepare makes cfg fit pooler, with extra settings besides those of the
// URL, and returns what each transaction must set, nil when nothing:
// without a pooler the settings are startup parameters; behind a session
// pooler a SET after connecting; behind a transaction pooler the returned
// settings, which the caller applies in each transaction.
func prepare(cfg *pgxpool.Config, pooler Pooler, extra map[string]string) *settings {
	if pooler == PoolerNone {
		maps.Copy(cfg.ConnConfig.RuntimeParams, extra)
		return nil
	}
	params := takeSettings(cfg.ConnConfig)
	maps.Copy(params, extra)
	if pooler == PoolerSession {
		if set := newSettings(params, false); set != nil {
			after := cfg.AfterConnect
			cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
				if after != nil {
					if err := after(ctx, conn); err != nil {
						return err
					}
				}
				_, err := conn.Exec(ctx, set.sql, set.args...)
				return err
			}
		}
		return nil
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		registerTypes(conn)
		if after != nil {
			return after(ctx, conn)
		}
		return nil
	}
	return newSettings(params, true)
}

// registerTypes tells conn the PostgreSQL types of the Go types this
// package passes as parameters that pgx cannot type by itself: in exec
// mode nothing asks the server for the types of a statement's parameters.
func registerTypes(conn *pgx.Conn) {
	conn.TypeMap().RegisterDefaultPgType([]uuid.UUID{}, "_uuid")
	conn.TypeMap().RegisterDefaultPgType(uuid.UUID{}, "uuid")
}

// pooled sends statements to a pool outside any transaction, each with the
// settings of set when it is not nil: the settings and the statement go in
// one round trip, one implicit transaction, so set_config(..., true)
// holds for the statement and for nothing after it.
type pooled struct {
	pool *pgxpool.Pool
	set  *settings
}

var _ Querier = pooled{}

func (p pooled) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if p.set == nil {
		return p.pool.Exec(ctx, sql, args...)
	}
	br := p.send(ctx, sql, args)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (p pooled) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if p.set == nil {
		return p.pool.Query(ctx, sql, args...)
	}
	br := p.send(ctx, sql, args)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return errRows{err}, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return errRows{err}, err
	}
	return &pipeRows{Rows: rows, br: br}, nil
}

func (p pooled) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if p.set == nil {
		return p.pool.QueryRow(ctx, sql, args...)
	}
	rows, err := p.Query(ctx, sql, args...)
	return pipeRow{rows: rows, err: err}
}

func (p pooled) send(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(p.set.sql, p.set.args...)
	b.Queue(sql, args...)
	return p.pool.SendBatch(ctx, b)
}
