package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
)

// Outbox is the [outbox.RelayStore] of this backend, and has what
// operators use: [Outbox.Buried], [Outbox.Lookup] and [Outbox.Requeue].
//
// Add runs in the unit of work's transaction. The relay's bookkeeping
// (Claim, Ack, AckAll, Retry, Bury) queues for the write connection like a
// unit of work, so it never overlaps another write of this process, and a
// claim is an IMMEDIATE transaction, which holds SQLite's write lock against
// other processes too: concurrent claims never return one message twice.
// Backlog, Buried and Lookup read on the read pool and wait for no writer.
type Outbox struct {
	db *DB
}

var (
	_ outbox.RelayStore = (*Outbox)(nil)
)

// addChunk is how many messages one INSERT statement of [Outbox.Add] takes,
// well below SQLite's limit of 32766 parameters.
const addChunk = 200

// Add stores msgs as part of t. The messages that a relay of this process
// takes through the DB's [outbox.Handover] are stored leased to it and
// handed to it once t commits. For the others, once t commits, every relay
// of this process that listens on the same DB is woken
// ([Outbox.Wakeups]); if t rolls back, none is. It returns an error
// wrapping [outbox.ErrInvalidMessage], before writing anything, when a
// message cannot be stored.
func (o *Outbox) Add(ctx context.Context, t uow.Tx, msgs ...outbox.Message) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	if len(msgs) == 0 {
		return nil
	}
	for _, m := range msgs {
		if err := outbox.Check(m); err != nil {
			return err // It says "outbox: invalid message".
		}
	}
	keyed := 0
	for _, m := range msgs {
		if m.Key != "" {
			keyed++
		}
	}
	// The messages of one Add share its context, and so their origin.
	origin := outbox.OriginFrom(ctx)
	originJSON, err := originParam(origin)
	if err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	// Only a unit of work that runs its hooks can hand a relay what it
	// took, or give it back.
	var taken *outbox.Taken
	if st.hooked {
		taken = st.db.handover.Take(origin, msgs)
	}
	err = st.atomically(ctx, len(msgs) > addChunk || keyed > 0, func() error {
		// The keyed messages take the next numbers of outbox_sequence, in
		// the order of msgs; the transaction holds the write lock, so no
		// other takes the same.
		var seq int64
		if keyed > 0 {
			if err := st.QueryRowContext(ctx, `UPDATE outbox_sequence SET last = last + ? RETURNING last - ?`, keyed, keyed).Scan(&seq); err != nil {
				return err
			}
		}
		first := 0 // The index in msgs of chunk's first message.
		for chunk := range slices.Chunk(msgs, addChunk) {
			args := make([]any, 0, 9*len(chunk))
			for i, m := range chunk {
				due, attempts := taken.Due(first+i, m)
				var key, k any
				if m.Key != "" {
					seq++
					key, k = m.Key, seq
				}
				args = append(args, m.ID, m.Topic, string(m.Payload), micros(m.CreatedAt), micros(due), attempts, key, k, originJSON)
			}
			q := `INSERT INTO outbox_messages (id, topic, payload, created_at, due_at, attempts, ordering_key, seq, origin) VALUES ` +
				valueRows(len(chunk), 9)
			if _, err := st.ExecContext(ctx, q, args...); err != nil {
				return err
			}
			first += len(chunk)
		}
		return nil
	})
	if err != nil {
		// The messages are not stored, even should t commit.
		taken.RolledBack()
		return fmt.Errorf("outbox: add: %w", err)
	}
	if taken.Len() > 0 {
		st.onEnd(func() {
			if !taken.Committed() {
				st.db.wake.Wake() // They were released, due at once.
			}
		}, taken.RolledBack)
	}
	// The messages left are in t's database: wake its relays once t
	// commits, once however many Adds it made, whichever Outbox value made
	// them.
	if taken.Len() < len(msgs) && !st.wakes {
		st.wakes = true
		st.onCommit(st.db.wake.Wake)
	}
	return nil
}

// originParam returns origin, given to the messages of an Add, as the
// text of its JSON, or nil (NULL) for the zero Origin.
func originParam(origin outbox.Origin) (any, error) {
	b, err := outbox.EncodeOrigin(origin)
	if err != nil || b == nil {
		return nil, err
	}
	return string(b), nil
}

// valueRows returns n groups of cols parameters, "(?, ?), (?, ?)", for a
// multi-row VALUES clause.
func valueRows(n, cols int) string {
	row := "(" + strings.Repeat("?, ", cols-1) + "?)"
	return strings.Repeat(row+", ", n-1) + row
}

// Handover returns the DB's [outbox.Handover]: its relays in this process
// take the messages of its units of work through it.
func (o *Outbox) Handover() *outbox.Handover { return &o.db.handover }

// Claim leases due messages as [outbox.Store.Claim] describes, those that
// the scope of ctx admits ([outbox.WithScope]), in one
// IMMEDIATE transaction on the write connection, so that no other claim
// (of this process or another) runs between its two statements: the first
// picks the earliest due messages in order, the second moves their due time
// to the end of the lease, counts an attempt, and returns them. RETURNING
// keeps no order; the first statement's restores it.
func (o *Outbox) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Message, error) {
	got, err := o.ClaimWithOrigins(ctx, now, lease, limit)
	return outbox.Messages(got), err
}

// ClaimWithOrigins claims as [Outbox.Claim] does, and returns each message
// with its origin.
func (o *Outbox) ClaimWithOrigins(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Claimed, error) {
	if limit < 1 {
		return nil, fmt.Errorf("outbox: claim: limit must be at least 1, got %d", limit)
	}
	if lease <= 0 {
		return nil, fmt.Errorf("outbox: claim: lease must be positive, got %s", lease)
	}
	var msgs []outbox.Claimed
	err := o.db.bookkeep(ctx, func(w conn) error {
		tx, err := w.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		ids, err := dueIDs(ctx, tx, now, limit, outbox.ScopeFrom(ctx))
		if err != nil || len(ids) == 0 {
			return err
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `
UPDATE outbox_messages SET due_at = ?, attempts = attempts + 1
WHERE id IN (SELECT value FROM json_each(?))
RETURNING id, topic, payload, created_at, attempts, coalesce(ordering_key, ''), origin`, micros(now.Add(lease)), string(list))
		if err != nil {
			return err
		}
		defer rows.Close()
		byID := make(map[uuid.UUID]outbox.Claimed, len(ids))
		for rows.Next() {
			var m outbox.Claimed
			var payload string
			var created int64
			var origin []byte
			if err := rows.Scan(&m.ID, &m.Topic, &payload, &created, &m.Attempts, &m.Key, &origin); err != nil {
				return err
			}
			m.Payload, m.CreatedAt = []byte(payload), fromMicros(created)
			if m.Origin, err = outbox.DecodeOrigin(origin); err != nil {
				return fmt.Errorf("message %s: %w", m.ID, err)
			}
			byID[m.ID] = m
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(byID) != len(ids) {
			return fmt.Errorf("updated %d of the %d due messages", len(byID), len(ids))
		}
		msgs = make([]outbox.Claimed, len(ids))
		for i, id := range ids {
			msgs[i] = byID[id]
		}
		return tx.Commit()
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	return msgs, nil
}

// dueIDs returns the IDs of up to limit messages due at now that f admits,
// earliest due first.
func dueIDs(ctx context.Context, tx *sql.Tx, now time.Time, limit int, f outbox.Scope) ([]uuid.UUID, error) {
	// A keyed message is due only while no message of its key added
	// before it is held: the NOT EXISTS probes the key's index.
	q, args := `
SELECT id FROM outbox_messages AS c
WHERE buried_at IS NULL AND due_at <= ?
AND (ordering_key IS NULL OR NOT EXISTS (
	SELECT 1 FROM outbox_messages AS p
	WHERE p.ordering_key = c.ordering_key AND p.seq < c.seq AND p.buried_at IS NULL))`, []any{micros(now)}
	if len(f.Only) > 0 {
		only, err := json.Marshal(f.Only)
		if err != nil {
			return nil, err
		}
		q, args = q+` AND topic IN (SELECT value FROM json_each(?))`, append(args, string(only))
	}
	if len(f.Except) > 0 {
		except, err := json.Marshal(f.Except)
		if err != nil {
			return nil, err
		}
		q, args = q+` AND topic NOT IN (SELECT value FROM json_each(?))`, append(args, string(except))
	}
	if !f.From.IsZero() {
		q, args = q+` AND due_at >= ?`, append(args, micros(f.From))
	}
	rows, err := tx.QueryContext(ctx, q+`
ORDER BY due_at, id
LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// fence is the condition under which a settlement under a lease changes a
// message: what the claim of the lease wrote is still there.
const fence = ` AND attempts = ? AND due_at = ?`

// Ack removes a delivered message; a message already gone is not an error.
// Under a lease ([outbox.WithLease]) it removes it only while that lease is
// its latest claim.
func (o *Outbox) Ack(ctx context.Context, id uuid.UUID) error {
	q, args := `DELETE FROM outbox_messages WHERE id = ?`, []any{id}
	if l, ok := outbox.LeaseFrom(ctx, id); ok {
		q, args = q+fence, append(args, l.Attempts, micros(l.Until))
	}
	err := o.db.bookkeep(ctx, func(c conn) error {
		_, err := c.ExecContext(ctx, q, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox: ack %s: %w", id, err)
	}
	return nil
}

// AckAll removes delivered messages in one statement, each only while its
// lease is its latest claim. Its one parameter is the JSON array of the
// leases, each [id, attempts, until].
func (o *Outbox) AckAll(ctx context.Context, leases []outbox.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	rows := make([][3]any, len(leases))
	for i, l := range leases {
		rows[i] = [3]any{l.ID, l.Attempts, micros(l.Until)}
	}
	list, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("outbox: ack %d messages: %w", len(leases), err)
	}
	err = o.db.bookkeep(ctx, func(c conn) error {
		_, err := c.ExecContext(ctx, `
DELETE FROM outbox_messages WHERE id IN (
	SELECT m.id FROM json_each(?) AS l
	JOIN outbox_messages AS m
	ON m.id = l.value->>0 AND m.attempts = l.value->>1 AND m.due_at = l.value->>2
)`, string(list))
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox: ack %d messages: %w", len(leases), err)
	}
	return nil
}

// settle runs q, an UPDATE of the message id whose further parameters are
// args, fenced by the lease ctx carries for it, and maps no row changed to
// [outbox.ErrLeaseLost] under a lease and to [outbox.ErrNotFound] without.
func (o *Outbox) settle(ctx context.Context, op string, id uuid.UUID, q string, args ...any) error {
	args = append(args, id)
	gone := outbox.ErrNotFound
	if l, ok := outbox.LeaseFrom(ctx, id); ok {
		q, args, gone = q+fence, append(args, l.Attempts, micros(l.Until)), outbox.ErrLeaseLost
	}
	var n int64
	err := o.db.bookkeep(ctx, func(c conn) error {
		res, err := c.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox: %s %s: %w", op, id, err)
	}
	if n == 0 {
		return fmt.Errorf("outbox: %s %s: %w", op, id, gone)
	}
	return nil
}

// Retry makes a message due again at at, keeping reason, under the lease
// ctx carries if any; under a released lease it gives back the claim's
// attempt instead, as [outbox.Lease] says. A buried message stays buried:
// [outbox.ErrLeaseLost] under a lease, [outbox.ErrNotFound] without one.
func (o *Outbox) Retry(ctx context.Context, id uuid.UUID, at time.Time, reason string) error {
	if l, ok := outbox.LeaseFrom(ctx, id); ok && l.Released {
		return o.settle(ctx, "release", id,
			`UPDATE outbox_messages SET due_at = ?, attempts = attempts - 1 WHERE id = ? AND buried_at IS NULL`,
			micros(at))
	}
	return o.settle(ctx, "retry", id,
		`UPDATE outbox_messages SET due_at = ?, last_error = ? WHERE id = ? AND buried_at IS NULL`,
		micros(at), reason)
}

// Bury stops delivering a message and keeps it with reason, buried at the
// time of the machine's clock, under the lease ctx carries if any. Burying
// a buried message replaces its reason.
func (o *Outbox) Bury(ctx context.Context, id uuid.UUID, reason string) error {
	return o.settle(ctx, "bury", id,
		`UPDATE outbox_messages SET buried_at = coalesce(buried_at, ?), last_error = ? WHERE id = ?`,
		micros(time.Now()), reason)
}

// Requeue makes a buried message due again at at.
func (o *Outbox) Requeue(ctx context.Context, id uuid.UUID, at time.Time) error {
	var n int64
	err := o.db.bookkeep(ctx, func(c conn) error {
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		var seq int64
		if err := tx.QueryRowContext(ctx, `UPDATE outbox_sequence SET last = last + 1 RETURNING last`).Scan(&seq); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `
UPDATE outbox_messages SET buried_at = NULL, attempts = 0, due_at = ?,
	seq = CASE WHEN ordering_key IS NULL THEN NULL ELSE ? END
WHERE id = ? AND buried_at IS NOT NULL`, micros(at), seq, id)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return fmt.Errorf("outbox: requeue %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("outbox: requeue %s: %w", id, outbox.ErrNotFound)
	}
	return nil
}

// Backlog counts the due and the buried messages and finds the longest-due
// one, as [outbox.RelayStore] describes, from the partial indexes.
func (o *Outbox) Backlog(ctx context.Context, now time.Time) (outbox.Backlog, error) {
	var b outbox.Backlog
	var oldest sql.NullInt64
	err := o.db.read.QueryRowContext(ctx, `
SELECT
	(SELECT count(*) FROM outbox_messages WHERE buried_at IS NULL AND due_at <= ?1),
	(SELECT count(*) FROM outbox_messages WHERE buried_at IS NOT NULL),
	(SELECT min(due_at) FROM outbox_messages WHERE buried_at IS NULL AND due_at <= ?1)`, micros(now)).
		Scan(&b.Due, &b.Buried, &oldest)
	if err != nil {
		return outbox.Backlog{}, fmt.Errorf("outbox: backlog: %w", err)
	}
	if oldest.Valid {
		b.OldestDue = fromMicros(oldest.Int64)
	}
	return b, nil
}

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = `id, topic, payload, created_at, attempts, coalesce(ordering_key, ''), due_at, coalesce(last_error, ''), buried_at, origin`

type scanner interface{ Scan(dest ...any) error }

func scanRecord(row scanner) (outbox.Record, error) {
	var r outbox.Record
	var payload string
	var created, due int64
	var buried sql.NullInt64
	var origin []byte
	if err := row.Scan(&r.ID, &r.Topic, &payload, &created, &r.Attempts, &r.Key, &due, &r.LastError, &buried, &origin); err != nil {
		return r, err
	}
	var err error
	if r.Origin, err = outbox.DecodeOrigin(origin); err != nil {
		return r, err
	}
	r.Payload, r.CreatedAt, r.DueAt = []byte(payload), fromMicros(created), fromMicros(due)
	if buried.Valid {
		r.BuriedAt = fromMicros(buried.Int64)
	}
	return r, nil
}

// Buried returns up to limit buried messages, oldest burial first.
func (o *Outbox) Buried(ctx context.Context, limit int) ([]outbox.Record, error) {
	if limit < 0 {
		return nil, fmt.Errorf("outbox: buried: limit must not be negative, got %d", limit)
	}
	return o.records(ctx, "buried", `SELECT `+recordColumns+` FROM outbox_messages
WHERE buried_at IS NOT NULL ORDER BY buried_at, id LIMIT ?`, limit)
}

// List returns up to f.Limit messages that f admits, earliest due first
// (buried ones by their due time too).
func (o *Outbox) List(ctx context.Context, f outbox.ListFilter) ([]outbox.Record, error) {
	q, args := `SELECT `+recordColumns+` FROM outbox_messages WHERE true`, []any{}
	switch f.State {
	case "":
	case outbox.StateBuried:
		q += ` AND buried_at IS NOT NULL`
	case outbox.StateDue:
		q, args = q+` AND buried_at IS NULL AND due_at <= ?`, append(args, micros(f.Now))
	case outbox.StateWaiting:
		q, args = q+` AND buried_at IS NULL AND due_at > ?`, append(args, micros(f.Now))
	default:
		return nil, fmt.Errorf("outbox: list: unknown state %q", f.State)
	}
	if f.Topic != "" {
		q, args = q+` AND topic = ?`, append(args, f.Topic)
	}
	return o.records(ctx, "list", q+` ORDER BY due_at, id LIMIT ?`, append(args, f.Limit)...)
}

// records returns the messages that q selects ([recordColumns]) on a read
// connection; op names the operation in errors.
func (o *Outbox) records(ctx context.Context, op, q string, args ...any) ([]outbox.Record, error) {
	rows, err := o.db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("outbox: %s: %w", op, err)
	}
	defer rows.Close()
	var recs []outbox.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("outbox: %s: %w", op, err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: %s: %w", op, err)
	}
	return recs, nil
}

// Discard deletes a buried message. It returns [outbox.ErrNotFound] for a
// message the store does not hold and [outbox.ErrNotBuried] for one still
// to deliver, which it leaves alone.
func (o *Outbox) Discard(ctx context.Context, id uuid.UUID) error {
	var n int64
	err := o.db.bookkeep(ctx, func(c conn) error {
		res, err := c.ExecContext(ctx, `DELETE FROM outbox_messages WHERE id = ? AND buried_at IS NOT NULL`, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox: discard %s: %w", id, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := o.Lookup(ctx, id); err != nil {
		return fmt.Errorf("outbox: discard %s: %w", id, outbox.ErrNotFound)
	}
	return fmt.Errorf("outbox: discard %s: %w", id, outbox.ErrNotBuried)
}

// RedactBuried removes fields from the JSON payloads of the buried
// messages of topic created before before, and returns how many it
// changed; a message still to deliver is never changed. Each field is a
// top-level key of letters, digits and underscores.
func (o *Outbox) RedactBuried(ctx context.Context, topic string, fields []string, before time.Time) (int64, error) {
	if err := outbox.CheckFields(fields); err != nil {
		return 0, fmt.Errorf("outbox: redact buried: %w", err)
	}
	paths := make([]string, len(fields))
	args := make([]any, 0, 2*len(fields)+2)
	for i, f := range fields {
		paths[i] = "$." + f
		args = append(args, paths[i])
	}
	args = append(args, topic, micros(before))
	has := make([]string, len(fields))
	for i := range fields {
		has[i] = "json_type(payload, ?) IS NOT NULL"
		args = append(args, paths[i])
	}
	q := `UPDATE outbox_messages SET payload = json_remove(payload` + strings.Repeat(", ?", len(fields)) + `)
WHERE buried_at IS NOT NULL AND topic = ? AND created_at < ? AND (` + strings.Join(has, " OR ") + `)`
	var n int64
	err := o.db.bookkeep(ctx, func(c conn) error {
		res, err := c.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("outbox: redact buried: %w", err)
	}
	return n, nil
}

// DiscardBuried deletes the buried messages of topic (every topic when
// empty) buried before before, and returns how many.
func (o *Outbox) DiscardBuried(ctx context.Context, topic string, before time.Time) (int64, error) {
	var n int64
	err := o.db.bookkeep(ctx, func(c conn) error {
		res, err := c.ExecContext(ctx, `DELETE FROM outbox_messages
WHERE buried_at IS NOT NULL AND buried_at < ? AND (? = '' OR topic = ?)`, micros(before), topic, topic)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("outbox: discard buried: %w", err)
	}
	return n, nil
}

// Lookup returns the message with id and its delivery state.
func (o *Outbox) Lookup(ctx context.Context, id uuid.UUID) (outbox.Record, error) {
	rec, err := scanRecord(o.db.read.QueryRowContext(ctx,
		`SELECT `+recordColumns+` FROM outbox_messages WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return outbox.Record{}, fmt.Errorf("outbox: lookup %s: %w", id, outbox.ErrNotFound)
	}
	if err != nil {
		return outbox.Record{}, fmt.Errorf("outbox: lookup %s: %w", id, err)
	}
	return rec, nil
}

// Wakeups returns a channel that receives a value after each commit of a
// unit of work of this DB that added messages ([Outbox.Add]), in this
// process: SQLite has no notifications between processes, so a relay in
// another process finds those messages at its next poll. Every channel of
// the DB is woken, before the committing [Runner.Do] returns; a wake-up
// that finds the channel full coalesces with the one waiting there. Commits
// before Wakeups returns send nothing; the relay claims once at start for
// them. The channel is closed when ctx is done.
func (o *Outbox) Wakeups(ctx context.Context) <-chan struct{} {
	return o.db.wake.Subscribe(ctx).C()
}

// conn is what the relay's bookkeeping runs its statements on.
type conn interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// bookkeep runs fn, a write of the relay's bookkeeping, on the write
// connection, with synchronous=NORMAL while it runs: its commit then waits
// for no flush to disk, and a crash of the machine can lose it, which only
// makes the relay deliver a message again, as at-least-once delivery
// allows. Units of work always find the connection at synchronous=FULL; a
// connection whose setting cannot be restored is discarded.
//
// It pays: on a disk whose flush takes about 0.3 ms, a batch of ten
// messages claimed and acknowledged took 0.30 ms at NORMAL and 0.84 ms at
// FULL (BenchmarkBookkeeping), of which switching the setting costs some
// 0.02 ms.
func (db *DB) bookkeep(ctx context.Context, fn func(c conn) error) error {
	if err := checkNotNested(ctx, db); err != nil {
		return err
	}
	if !db.relaxed {
		return fn(db.write)
	}
	c, err := db.write.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return errors.Join(err, c.Close())
	}
	fnErr := fn(c)
	if _, err := c.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); err != nil {
		// Never let a unit of work commit without a flush.
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		return errors.Join(fnErr, fmt.Errorf("restore synchronous=FULL: %w", err))
	}
	return errors.Join(fnErr, c.Close())
}

var _ outbox.Purger = (*Outbox)(nil)

// Addressed returns the messages of topic whose payload holds value in
// field, as [outbox.Purger] describes.
func (o *Outbox) Addressed(ctx context.Context, t uow.Tx, topic, field, value string) ([]outbox.Message, error) {
	if err := outbox.CheckFields([]string{field}); err != nil {
		return nil, fmt.Errorf("outbox: addressed: %w", err)
	}
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("outbox: addressed: %w", err)
	}
	rows, err := st.QueryContext(ctx, `SELECT `+recordColumns+` FROM outbox_messages
WHERE topic = ? AND json_extract(payload, ?) = ? ORDER BY created_at, id`, topic, "$."+field, value)
	if err != nil {
		return nil, fmt.Errorf("outbox: addressed: %w", err)
	}
	defer rows.Close()
	var msgs []outbox.Message
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("outbox: addressed: %w", err)
		}
		msgs = append(msgs, r.Message)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: addressed: %w", err)
	}
	return msgs, nil
}

// Delete deletes the messages with ids or one of keys, as [outbox.Purger]
// describes.
func (o *Outbox) Delete(ctx context.Context, t uow.Tx, ids []uuid.UUID, keys []string) (int64, error) {
	st, err := asTx(t)
	if err != nil {
		return 0, fmt.Errorf("outbox: delete: %w", err)
	}
	if len(ids) == 0 && len(keys) == 0 {
		return 0, nil
	}
	args := make([]any, 0, len(ids)+len(keys))
	for _, id := range ids {
		args = append(args, id.String())
	}
	for _, k := range keys {
		args = append(args, k)
	}
	q := `DELETE FROM outbox_messages WHERE id IN (` + placeholders(len(ids)) + `) OR ordering_key IN (` + placeholders(len(keys)) + `)`
	res, err := st.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("outbox: delete: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("outbox: delete: %w", err)
	}
	return n, nil
}

// placeholders returns n comma-separated placeholders, or NULL for none,
// which an IN list matches nothing with.
func placeholders(n int) string {
	if n == 0 {
		return "NULL"
	}
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
