package postgres

// LoadSinceQuery is the statement of [EventStore.LoadSince], for the test
// that explains it.
const LoadSinceQuery = loadSinceQuery
