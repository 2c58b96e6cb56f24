// Package budgettest is the conformance suite of [mail.BudgetStore], the
// store of the mail budgets of mailboxes, driven through [mail.Budget],
// the decision of what a spend does to them. Every backend runs it
// unchanged, as it runs the suites of the event store, the outbox and
// the user views, through backendtest:
//
//	budgettest.Run(t, budgettest.Features{}, func(t *testing.T) budgettest.Harness {
//		db := pgtest.New(t)
//		return budgettest.Harness{
//			Runner: func(now func() time.Time) uow.Runner { return db.Runner(now) },
//			Store:  db.MailBudgets(),
//			Keys:   keyringtest.New(t, db.DataKeys()),
//		}
//	})
//
// It holds every backend to what [mail.Budget] promises: at most Limit
// mails to a mailbox, all its spellings together, in any Window, and
// never more when many spend its last unit at once; a message spends
// once however often it is delivered; a mail that is never held back is
// counted; an idle budget is swept and a live one is not; and the store
// sees no address, only a keyed hash of the mailbox. It sees the store
// through its methods alone and reads no clock but the one it moves.
package budgettest
