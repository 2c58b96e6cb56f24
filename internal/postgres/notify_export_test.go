package postgres

// Channel returns the LISTEN/NOTIFY channel of db's outbox.
func Channel(db *DB) string { return db.channel }

// NotifyRequests returns how many commits have asked db's notifier for a
// notification.
func NotifyRequests(db *DB) int64 { return db.notifier.asked.Load() }

// BeforeNotify makes fn run before each notification that db sends. It
// must be called before the first commit that adds messages.
func BeforeNotify(db *DB, fn func()) { db.notifier.beforeSend = fn }
