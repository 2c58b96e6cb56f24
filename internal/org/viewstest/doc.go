// Package viewstest is the conformance suite of [org.Views], the tables
// of the organizations domain's inline read models. Every backend runs it
// unchanged, through backendtest.Run, as it runs the suites of its other
// ports:
//
//	viewstest.Run(t, func(t *testing.T) viewstest.Harness {
//		db := sqlitetest.New(t)
//		return viewstest.Harness{Runner: db.Runner(nil), Views: db.OrgViews(), Users: db.Views()}
//	})
//
// The suite drives the views through their operations directly, with rows
// it makes itself, and sees them only through their queries, never their
// tables, so it knows no SQL dialect. The user views put the accounts
// whose addresses [org.Views.Members] shows.
//
// Besides what [org.Views] documents, it holds every backend to what they
// all do, on which the service and a rebuild rely:
//
//   - Times come back as the instants put, in UTC, to the microsecond.
//   - OrganizationsOf orders names by their Unicode code points, as Go
//     compares strings: "Zeta" before "alpha" before "Äpfel".
//   - CountOrganizationsOf counts what OrganizationsOf lists, which
//     leaves out a membership of an organization the views do not hold.
//   - Members leaves out a member whose account has no row in the user
//     views, and shows the address the account has at the time of asking.
//   - A put of a key that is there (an organization's ID, a member of an
//     organization, an invitation's ID or code hash) fails its unit of
//     work, by the time it commits; what the unit of work wrote is undone.
//   - SetRole, DeleteMember and DeleteInvitation of a row that is not
//     there change nothing and are no error.
//   - DeleteOrganization leaves nothing of the organization: one put
//     again under its ID has no members and no invitations.
//   - Reset empties the views and leaves the user views as they are.
//   - Every write in a read-only unit of work fails with an error
//     wrapping [uow.ErrReadOnly], and every method with a transaction of
//     another backend, or none, with one wrapping [uow.ErrForeignTx].
package viewstest
