// Package backend is the one seam between the service and its database.
// A backend (the packages postgres and sqlite) is one value, its *DB,
// that opens a database and hands out every port the service needs: the
// unit of work, the event store, the outbox store, the event log that
// asynchronous projections follow, the user views, the organizations'
// views, the activity projection's tables, the keyring's data keys and
// the mail budgets. Each *DB implements [Backend] directly, checked at
// compile time, so the command line picks a backend once, by
// DATABASE_URL, and uses it through this interface (only a benchmark
// that holds PostgreSQL's horizon asks for the *DB itself).
//
// The ports themselves are defined beside the code that uses them and
// their conformance suites: [uow.Runner], [eventstore.Store],
// [outbox.RelayStore] with [outbox.Operator] and [outbox.Purger],
// [async.Log], [keyring.Store], [user.Views], [org.Views],
// [user.ActivityStore], whose tables the domain's [user.ActivityProjection]
// writes over [Backend.Log], and [mail.BudgetStore]. This package only gathers them. The ports of
// one backend accept only the transactions of its own [uow.Runner], and
// turn its driver's errors into the project's sentinel errors.
//
// Every backend runs the conformance suites of all its ports from one
// test, through backendtest.Run.
package backend
