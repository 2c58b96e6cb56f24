package postgres

// Channel returns the LISTEN/NOTIFY channel of db's outbox.
func Channel(db *DB) string { return notifyChannel(db.schema) }
