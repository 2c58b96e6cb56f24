package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
)

// Outbox is the [outbox.RelayStore] of this backend, an [outbox.Listener],
// and has what operators use: [Outbox.Buried], [Outbox.Lookup] and
// [Outbox.Requeue].
type Outbox struct {
	pool pooled
	// channel is the LISTEN/NOTIFY channel on which relays hear that
	// messages were committed. It is named after the schema, so that
	// deployments sharing one database do not wake each other.
	channel string
	// db is the DB of the store: its in-process wake-ups, its notifier and
	// its logger.
	db *DB
}

// notifyChannel returns the channel name for the outbox in schema, within
// PostgreSQL's 63-byte limit on identifiers.
func notifyChannel(schema string) string {
	name := "outbox_messages." + schema
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(schema))
		name = "outbox_messages." + hex.EncodeToString(sum[:8])
	}
	return name
}

var (
	_ outbox.RelayStore = (*Outbox)(nil)
	_ outbox.Listener   = (*Outbox)(nil)
)

// Listening reports whether commits of other processes wake this store's
// relays at once, as [DB.Listening] says.
func (o *Outbox) Listening() bool { return o.db.Listening() }

// Handover returns the DB's [outbox.Handover]: its relays in this process
// take the messages of its units of work through it.
func (o *Outbox) Handover() *outbox.Handover { return &o.db.handover }

// Add stores msgs as part of t. The messages that a relay of this process
// takes through the DB's [outbox.Handover] are stored leased to it and
// handed to it once t commits. For the others, once t commits, the relays
// of t's DB in this process are woken at once and those of other processes
// soon after, by a notification that the DB sends (see [Outbox.Wakeups]);
// if t rolls back, none is. The transaction itself sends no notification:
// that would make its commit queue behind every other notifying commit of
// the server.
//
// The INSERT goes to the server with t's next statement or its commit, not
// in a round trip of its own (messages are checked before, and their IDs
// are the callers' own); an error of it is returned there, and t rolls
// back.
func (o *Outbox) Add(ctx context.Context, t uow.Tx, msgs ...outbox.Message) error {
	pt, err := asTx(t)
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
	wrap := func(err error) error { return fmt.Errorf("outbox: add: %w", err) }
	origin := outbox.OriginFrom(ctx)
	originJSON, err := originParam(origin)
	if err != nil {
		return wrap(err)
	}
	// Only a unit of work that runs its hooks can hand a relay what it
	// took, or give it back.
	var taken *outbox.Taken
	if pt.hooked {
		taken = o.db.handover.Take(origin, msgs)
	}
	var q string
	var args []any
	if len(msgs) == 1 {
		// One message travels as scalars, which pgx encodes without the
		// reflection that arrays of UUIDs cost it.
		m := msgs[0]
		dueAt, attempts := taken.Due(0, m)
		q = `
INSERT INTO outbox_messages (id, topic, payload, created_at, due_at, attempts, ordering_key, origin)
VALUES ($1::uuid, $2::text, $3::text::json, $4::timestamptz, $5::timestamptz, $6::int4, nullif($7::text, ''), $8::text::json)`
		args = []any{pgtype.UUID{Bytes: m.ID, Valid: true}, m.Topic, string(m.Payload), m.CreatedAt, dueAt, attempts, m.Key, originJSON}
	} else {
		ids := make([]uuid.UUID, len(msgs))
		topics := make([]string, len(msgs))
		payloads := make([]string, len(msgs))
		created := make([]time.Time, len(msgs))
		dues := make([]time.Time, len(msgs))
		attempts := make([]int32, len(msgs))
		keys := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i], topics[i], payloads[i], created[i], keys[i] = m.ID, m.Topic, string(m.Payload), m.CreatedAt, m.Key
			var n int
			dues[i], n = taken.Due(i, m)
			attempts[i] = int32(n)
		}
		// The rows are inserted in the order of msgs, so that seq puts the
		// messages of one key in that order.
		// The messages of one Add share its context, and so their origin.
		q = `
INSERT INTO outbox_messages (id, topic, payload, created_at, due_at, attempts, ordering_key, origin)
SELECT id, topic, payload, created_at, due_at, attempts, nullif(key, ''), $8::text::json
FROM unnest($1::uuid[], $2::text[], $3::json[], $4::timestamptz[], $5::timestamptz[], $6::int4[], $7::text[]) WITH ORDINALITY AS m(id, topic, payload, created_at, due_at, attempts, key, n)
ORDER BY n`
		args = []any{ids, topics, payloads, created, dues, attempts, keys, originJSON}
	}
	if err := pt.later(ctx, q, args, wrap); err != nil {
		taken.RolledBack()
		return err
	}
	if taken.Len() > 0 {
		pt.onEnd(func() {
			if !taken.Committed() {
				o.db.wakeRelays() // They were released, due at once.
			}
		}, taken.RolledBack)
	}
	if taken.Len() < len(msgs) {
		pt.wakeRelays()
	}
	return nil
}

// Claim leases due messages as [outbox.Store.Claim] describes, those that
// the scope of ctx admits ([outbox.WithScope]). One statement picks them
// with FOR UPDATE SKIP LOCKED, so concurrent claims pass over each other's
// rows instead of waiting for them or taking them twice, and moves their
// due time to the end of the lease.
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
	// A keyed message is due only while no message of its key inserted
	// before it is held: the NOT EXISTS probes the key's index.
	const head = `
WITH due AS (
	SELECT id, due_at FROM outbox_messages AS c
	WHERE buried_at IS NULL AND due_at <= $1
	AND (ordering_key IS NULL OR NOT EXISTS (
		SELECT 1 FROM outbox_messages AS p
		WHERE p.ordering_key = c.ordering_key AND p.seq < c.seq AND p.buried_at IS NULL))`
	// The UPDATE finds its rows by an array of their IDs rather than by a
	// join with due: from a few hundred rows on, the planner would hash
	// the whole table for that join, a scan of the backlog per claim.
	const tail = `
	ORDER BY due_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), claimed AS (
	UPDATE outbox_messages AS m
	SET due_at = $2, attempts = m.attempts + 1
	WHERE m.id = ANY(ARRAY(SELECT id FROM due))
	RETURNING m.id, m.topic, m.payload::text AS payload, m.created_at, m.attempts, coalesce(m.ordering_key, '') AS ordering_key, m.origin::text AS origin
)
SELECT claimed.id, claimed.topic, claimed.payload, claimed.created_at, claimed.attempts, claimed.ordering_key, claimed.origin, due.due_at
FROM claimed JOIN due USING (id)`
	q, args := head, []any{now, now.Add(lease), limit}
	sc := outbox.ScopeFrom(ctx)
	param := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(sc.Only) > 0 {
		q += ` AND topic = ANY(` + param(sc.Only) + `::text[])`
	}
	if len(sc.Except) > 0 {
		q += ` AND NOT (topic = ANY(` + param(sc.Except) + `::text[]))`
	}
	if !sc.From.IsZero() {
		q += ` AND due_at >= ` + param(sc.From)
	}
	q += tail
	rows, err := o.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	type claimed struct {
		outbox.Claimed
		due time.Time
	}
	var got []claimed
	for rows.Next() {
		var c claimed
		var payload string
		var origin []byte
		if err := rows.Scan(&c.ID, &c.Topic, &payload, &c.CreatedAt, &c.Attempts, &c.Key, &origin, &c.due); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox: claim: %w", err)
		}
		c.Payload = []byte(payload)
		c.CreatedAt = c.CreatedAt.UTC()
		if c.Origin, err = outbox.DecodeOrigin(origin); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox: claim %s: %w", c.ID, err)
		}
		got = append(got, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	// RETURNING keeps no order; restore the one the claim chose.
	slices.SortFunc(got, func(a, b claimed) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return slices.Compare(a.ID[:], b.ID[:])
	})
	msgs := make([]outbox.Claimed, len(got))
	for i, c := range got {
		msgs[i] = c.Claimed
	}
	return msgs, nil
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

// fence is the condition under which a settlement under a lease changes a
// message, with the lease's attempt and end as parameters $n and $n+1:
// what the claim of the lease wrote is still there.
func fence(n int) string {
	return fmt.Sprintf(` AND attempts = $%d AND due_at = $%d`, n, n+1)
}

// Ack removes a delivered message; a message already gone is not an error.
// Under a lease ([outbox.WithLease]) it removes it only while that lease is
// its latest claim.
func (o *Outbox) Ack(ctx context.Context, id uuid.UUID) error {
	q, args := `DELETE FROM outbox_messages WHERE id = $1`, []any{id}
	if l, ok := outbox.LeaseFrom(ctx, id); ok {
		q, args = q+fence(2), append(args, l.Attempts, l.Until)
	}
	if _, err := o.pool.Exec(ctx, q, args...); err != nil {
		return fmt.Errorf("outbox: ack %s: %w", id, err)
	}
	return nil
}

// AckAll removes delivered messages in one statement, each only while its
// lease is its latest claim. The leases travel as three arrays in text form,
// which pgx passes through as they are: encoding a []uuid.UUID parameter
// took a slow path through reflection.
func (o *Outbox) AckAll(ctx context.Context, leases []outbox.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	ids, attempts, until := leaseArrays(leases)
	const q = `
DELETE FROM outbox_messages AS m
USING unnest($1::uuid[], $2::int4[], $3::timestamptz[]) AS l(id, attempts, until)
WHERE m.id = l.id AND m.attempts = l.attempts AND m.due_at = l.until`
	if _, err := o.pool.Exec(ctx, q, ids, attempts, until); err != nil {
		return fmt.Errorf("outbox: ack %d messages: %w", len(leases), err)
	}
	return nil
}

// leaseArrays returns the IDs, attempts and ends of leases as PostgreSQL
// array literals.
func leaseArrays(leases []outbox.Lease) (ids, attempts, until string) {
	var b []byte
	arr := func(each func(b []byte, l outbox.Lease) []byte) string {
		b = append(b[:0], '{')
		for i, l := range leases {
			if i > 0 {
				b = append(b, ',')
			}
			b = each(b, l)
		}
		return string(append(b, '}'))
	}
	ids = arr(func(b []byte, l outbox.Lease) []byte {
		var s [36]byte
		hex.Encode(s[0:8], l.ID[0:4])
		s[8] = '-'
		hex.Encode(s[9:13], l.ID[4:6])
		s[13] = '-'
		hex.Encode(s[14:18], l.ID[6:8])
		s[18] = '-'
		hex.Encode(s[19:23], l.ID[8:10])
		s[23] = '-'
		hex.Encode(s[24:], l.ID[10:])
		return append(b, s[:]...)
	})
	attempts = arr(func(b []byte, l outbox.Lease) []byte { return strconv.AppendInt(b, int64(l.Attempts), 10) })
	until = arr(func(b []byte, l outbox.Lease) []byte {
		b = append(b, '"')
		b = l.Until.UTC().AppendFormat(b, "2006-01-02 15:04:05.999999Z07:00")
		return append(b, '"')
	})
	return ids, attempts, until
}

// settle runs q, an UPDATE of the message id whose further parameters are
// args, fenced by the lease ctx carries for it, and maps no row changed to
// [outbox.ErrLeaseLost] under a lease and to [outbox.ErrNotFound] without.
func (o *Outbox) settle(ctx context.Context, op string, id uuid.UUID, q string, args ...any) error {
	args = append([]any{id}, args...)
	gone := outbox.ErrNotFound
	if l, ok := outbox.LeaseFrom(ctx, id); ok {
		q, args, gone = q+fence(len(args)+1), append(args, l.Attempts, l.Until), outbox.ErrLeaseLost
	}
	tag, err := o.pool.Exec(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("outbox: %s %s: %w", op, id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("outbox: %s %s: %w", op, id, gone)
	}
	return nil
}

// Retry makes a message due again at at, keeping reason, under the lease
// ctx carries if any; under a released lease it gives back the claim's
// attempt instead, as [outbox.Lease] says.
func (o *Outbox) Retry(ctx context.Context, id uuid.UUID, at time.Time, reason string) error {
	if l, ok := outbox.LeaseFrom(ctx, id); ok && l.Released {
		return o.settle(ctx, "release", id,
			`UPDATE outbox_messages SET due_at = $2, attempts = attempts - 1 WHERE id = $1 AND buried_at IS NULL`, at)
	}
	return o.settle(ctx, "retry", id,
		`UPDATE outbox_messages SET due_at = $2, last_error = $3 WHERE id = $1 AND buried_at IS NULL`, at, reason)
}

// Bury stops delivering a message and keeps it with reason, under the lease
// ctx carries if any. Burying a buried message replaces its reason.
func (o *Outbox) Bury(ctx context.Context, id uuid.UUID, reason string) error {
	return o.settle(ctx, "bury", id,
		`UPDATE outbox_messages SET buried_at = coalesce(buried_at, now()), last_error = $2 WHERE id = $1`, reason)
}

// Requeue makes a buried message due again at at, with its attempts counted
// from zero again and its last error kept. It returns an error wrapping
// [outbox.ErrNotFound] for a message that is not buried.
func (o *Outbox) Requeue(ctx context.Context, id uuid.UUID, at time.Time) error {
	tag, err := o.pool.Exec(ctx,
		`UPDATE outbox_messages SET buried_at = NULL, attempts = 0, due_at = $2, seq = DEFAULT WHERE id = $1 AND buried_at IS NOT NULL`,
		id, at)
	if err != nil {
		return fmt.Errorf("outbox: requeue %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("outbox: requeue %s: %w", id, outbox.ErrNotFound)
	}
	return nil
}

// Backlog counts the due and the buried messages and finds the longest-due
// one, as [outbox.RelayStore] describes, from the partial indexes.
func (o *Outbox) Backlog(ctx context.Context, now time.Time) (outbox.Backlog, error) {
	var b outbox.Backlog
	var oldest *time.Time
	err := o.pool.QueryRow(ctx, `
SELECT
	(SELECT count(*) FROM outbox_messages WHERE buried_at IS NULL AND due_at <= $1),
	(SELECT count(*) FROM outbox_messages WHERE buried_at IS NOT NULL),
	(SELECT min(due_at) FROM outbox_messages WHERE buried_at IS NULL AND due_at <= $1)`, now).
		Scan(&b.Due, &b.Buried, &oldest)
	if err != nil {
		return outbox.Backlog{}, fmt.Errorf("outbox: backlog: %w", err)
	}
	if oldest != nil {
		b.OldestDue = oldest.UTC()
	}
	return b, nil
}

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = `id, topic, payload::text, created_at, attempts, coalesce(ordering_key, ''), due_at, coalesce(last_error, ''), buried_at, origin::text`

func scanRecord(row pgx.CollectableRow) (outbox.Record, error) {
	var r outbox.Record
	var payload string
	var buried *time.Time
	var origin []byte
	if err := row.Scan(&r.ID, &r.Topic, &payload, &r.CreatedAt, &r.Attempts, &r.Key, &r.DueAt, &r.LastError, &buried, &origin); err != nil {
		return r, err
	}
	var err error
	if r.Origin, err = outbox.DecodeOrigin(origin); err != nil {
		return r, err
	}
	r.Payload, r.CreatedAt, r.DueAt = []byte(payload), r.CreatedAt.UTC(), r.DueAt.UTC()
	if buried != nil {
		r.BuriedAt = buried.UTC()
	}
	return r, nil
}

// Buried returns up to limit buried messages, oldest burial first.
func (o *Outbox) Buried(ctx context.Context, limit int) ([]outbox.Record, error) {
	rows, err := o.pool.Query(ctx, `SELECT `+recordColumns+` FROM outbox_messages
WHERE buried_at IS NOT NULL ORDER BY buried_at, id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: buried: %w", err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("outbox: buried: %w", err)
	}
	return recs, nil
}

// List returns up to f.Limit messages that f admits, earliest due first
// (buried ones by their due time too).
func (o *Outbox) List(ctx context.Context, f outbox.ListFilter) ([]outbox.Record, error) {
	q, args := `SELECT `+recordColumns+` FROM outbox_messages WHERE true`, []any{}
	param := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	switch f.State {
	case "":
	case outbox.StateBuried:
		q += ` AND buried_at IS NOT NULL`
	case outbox.StateDue:
		q += ` AND buried_at IS NULL AND due_at <= ` + param(f.Now)
	case outbox.StateWaiting:
		q += ` AND buried_at IS NULL AND due_at > ` + param(f.Now)
	default:
		return nil, fmt.Errorf("outbox: list: unknown state %q", f.State)
	}
	if f.Topic != "" {
		q += ` AND topic = ` + param(f.Topic)
	}
	q += ` ORDER BY due_at, id LIMIT ` + param(f.Limit)
	rows, err := o.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	return recs, nil
}

// Discard deletes a buried message. It returns [outbox.ErrNotFound] for a
// message the store does not hold and [outbox.ErrNotBuried] for one still
// to deliver, which it leaves alone.
func (o *Outbox) Discard(ctx context.Context, id uuid.UUID) error {
	var buried bool
	err := o.pool.QueryRow(ctx, `
WITH gone AS (DELETE FROM outbox_messages WHERE id = $1 AND buried_at IS NOT NULL RETURNING id)
SELECT EXISTS (SELECT 1 FROM gone)`, id).Scan(&buried)
	if err != nil {
		return fmt.Errorf("outbox: discard %s: %w", id, err)
	}
	if buried {
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
	tag, err := o.pool.Exec(ctx, `UPDATE outbox_messages SET payload = (payload::jsonb - $3::text[])::json
WHERE buried_at IS NOT NULL AND topic = $1 AND created_at < $2 AND payload::jsonb ?| $3::text[]`, topic, before, fields)
	if err != nil {
		return 0, fmt.Errorf("outbox: redact buried: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DiscardBuried deletes the buried messages of topic (every topic when
// empty) buried before before, and returns how many.
func (o *Outbox) DiscardBuried(ctx context.Context, topic string, before time.Time) (int64, error) {
	tag, err := o.pool.Exec(ctx, `DELETE FROM outbox_messages
WHERE buried_at IS NOT NULL AND buried_at < $1 AND ($2 = '' OR topic = $2)`, before, topic)
	if err != nil {
		return 0, fmt.Errorf("outbox: discard buried: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Lookup returns the message with id and its delivery state.
func (o *Outbox) Lookup(ctx context.Context, id uuid.UUID) (outbox.Record, error) {
	rows, err := o.pool.Query(ctx, `SELECT `+recordColumns+` FROM outbox_messages WHERE id = $1`, id)
	if err != nil {
		return outbox.Record{}, fmt.Errorf("outbox: lookup %s: %w", id, err)
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanRecord)
	if errors.Is(err, pgx.ErrNoRows) {
		return outbox.Record{}, fmt.Errorf("outbox: lookup %s: %w", id, outbox.ErrNotFound)
	}
	if err != nil {
		return outbox.Record{}, fmt.Errorf("outbox: lookup %s: %w", id, err)
	}
	return rec, nil
}

// Wakeups returns a channel that receives a value after each commit of a
// unit of work that added messages ([Outbox.Add]) to the schema of this
// store, coalesced: one that finds the channel full joins the one waiting
// there. A commit made through the same DB wakes it in process, before the
// committing [Runner.Do] returns. A commit made elsewhere, by another
// process or another DB, reaches it through LISTEN on a connection of its
// own (on the DB's listen URL when it has one). Behind a transaction
// pooler without a listen URL it cannot listen ([DB.Listening] is false,
// for the caller to tell the operator): it gives only the wake-ups of this
// DB, and the relay's poll finds the commits of others. When that
// connection fails, Wakeups logs a warning, connects again
// with a growing pause, and sends a wake-up once listening again, since
// notifications sent while it was away are lost; the relay's poll covers
// the gap. The channel is closed when ctx is done.
func (o *Outbox) Wakeups(ctx context.Context) <-chan struct{} {
	sub := o.db.wake.Subscribe(ctx)
	if !o.db.Listening() {
		return sub.C()
	}
	go func() {
		const firstPause = 100 * time.Millisecond
		pause := firstPause
		for {
			listened, err := o.listen(ctx, sub.Wake)
			if ctx.Err() != nil {
				return
			}
			if listened {
				pause = firstPause
			}
			o.db.log.WarnContext(ctx, "outbox: listen for commits of other processes; polling until listening again",
				"channel", o.channel, "error", err, "retry_in", pause)
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 5*time.Second)
		}
	}()
	return sub.C()
}

// listen calls wake once listening and then on every notification from
// another DB, until its connection fails or ctx ends. It reports whether
// it got as far as listening, and why it stopped.
func (o *Outbox) listen(ctx context.Context, wake func()) (bool, error) {
	cfg := o.db.listen.Copy()
	cfg.RuntimeParams["application_name"] = "outbox-listen"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("outbox: listen: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{o.channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("outbox: listen: %w", err)
	}
	wake()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("outbox: listen: %w", err)
		}
		// The DB's own commits woke its relays in process already.
		if n.Payload != o.db.notifier.id {
			wake()
		}
	}
}

var _ outbox.Purger = (*Outbox)(nil)

// Addressed returns the messages of topic whose payload holds value in
// field, as [outbox.Purger] describes.
func (o *Outbox) Addressed(ctx context.Context, t uow.Tx, topic, field, value string) ([]outbox.Message, error) {
	if err := outbox.CheckFields([]string{field}); err != nil {
		return nil, fmt.Errorf("outbox: addressed: %w", err)
	}
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("outbox: addressed: %w", err)
	}
	rows, err := ptx.Query(ctx, `SELECT `+recordColumns+` FROM outbox_messages
WHERE topic = $1 AND payload->>$2 = $3 ORDER BY created_at, id`, topic, field, value)
	if err != nil {
		return nil, fmt.Errorf("outbox: addressed: %w", err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("outbox: addressed: %w", err)
	}
	return messagesOf(recs), nil
}

// messagesOf returns the messages of recs.
func messagesOf(recs []outbox.Record) []outbox.Message {
	msgs := make([]outbox.Message, len(recs))
	for i, r := range recs {
		msgs[i] = r.Message
	}
	return msgs
}

// Delete deletes the messages with ids or one of keys, as [outbox.Purger]
// describes.
func (o *Outbox) Delete(ctx context.Context, t uow.Tx, ids []uuid.UUID, keys []string) (int64, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return 0, fmt.Errorf("outbox: delete: %w", err)
	}
	if len(ids) == 0 && len(keys) == 0 {
		return 0, nil
	}
	tag, err := ptx.Exec(ctx, `DELETE FROM outbox_messages WHERE id = ANY($1) OR ordering_key = ANY($2)`, ids, keys)
	if err != nil {
		return 0, fmt.Errorf("outbox: delete: %w", err)
	}
	return tag.RowsAffected(), nil
}
