package user

import (
	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/user/integration"
)

// The mapping from domain events to integration events: one function per
// integration event, from the domain event that causes it, the version it
// was appended at, and what the integration event tells in the clear that
// the domain event holds only sealed (an address). Each is tested against
// its event's JSON Schema under schemas/.

// registered is the integration event of e, the creation of an account,
// appended at version. e holds the address sealed; email is the address
// itself.
func registered(e Registered, email string, version int64) integration.Registered {
	return integration.Registered{UserID: e.UserID, Email: email, Version: version}
}

// signedIn is the integration event of e, a session started, appended at
// version to the stream of the account id, which e leaves to its stream
// ([UserOf]).
func signedIn(id uuid.UUID, _ SessionStarted, version int64) integration.SignedIn {
	return integration.SignedIn{UserID: id, Version: version}
}

// emailChanged is the integration event of e, a change of the account's
// address confirmed ([EmailChanged]) or undone ([EmailChangeUndone]),
// appended at version. e holds the addresses sealed; email is the
// account's address after it: the new one of a confirmation, the one an
// undoing returns to.
func emailChanged[E EmailChanged | EmailChangeUndone](e E, email string, version int64) integration.EmailChanged {
	var id uuid.UUID
	switch e := any(e).(type) {
	case EmailChanged:
		id = e.UserID
	case EmailChangeUndone:
		id = e.UserID
	}
	return integration.EmailChanged{UserID: id, Email: email, Version: version}
}

// deleted is the integration event of e, the erasure of an account,
// appended at version.
func deleted(e Erased, version int64) integration.Deleted {
	return integration.Deleted{UserID: e.UserID, Version: version}
}
