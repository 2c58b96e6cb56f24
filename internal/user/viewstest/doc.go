// Package viewstest is the conformance suite of [user.Views], the tables of
// the user domain's inline read models, driven through
// [user.ViewsProjection], the domain's decision of what each event does to
// them, and through [projections.Rebuild]. Every backend runs it unchanged
// from a test of its own, as it runs the suites of the event store and the
// outbox:
//
//	func TestUserViews(t *testing.T) {
//		t.Parallel()
//		viewstest.Run(t, func(t *testing.T) viewstest.Harness {
//			db := pgtest.New(t)
//			return viewstest.Harness{
//				Runner: func(now func() time.Time) uow.Runner { return db.Runner(now) },
//				Events: db.Events(),
//				Outbox: db.Outbox(),
//				Keys:   keyringtest.New(t, postgres.DataKeys{}),
//				Views:  postgres.UserViews{},
//			}
//		})
//	}
//
// The suite drives the views in two ways: through [user.NewService] over the
// harness, so that the events are the domain's own, and by applying events
// it makes itself with [user.ViewsProjection.Apply], to choose their hashes
// and times. It sees the views only through their queries, never their
// tables, so it knows no SQL dialect; the hashes of the codes and tokens the
// service makes it reads from the log.
//
// Besides what [user.Views] documents, it holds every backend to what they
// all do, on which both the service and the rebuild rely:
//
//   - A query answers a row until an operation removes it, whether or not
//     it has expired: the caller judges expiry, which is why Session
//     returns it. Expired rows go only with a sweep.
//   - Registered holds its address for its user, created at the event's
//     RecordedAt; EmailChanged moves the user to the new address, freeing
//     the old one, and keeps created_at.
//   - SignInLinkUsed removes its code, SessionEnded its session, and
//     EmailChanged the confirmation code it used, and only that one: the
//     user's other confirmation codes stay.
//   - Erased removes the user, their sessions and confirmation codes, and
//     the sign-in codes of their address.
//   - Events of other types are ignored, whatever their data.
//   - A rebuild from the log answers every query as the live views did.
package viewstest
