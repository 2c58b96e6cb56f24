package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// sweep is one of the app's periodic deletions of what has expired: it
// deletes and says how many rows it deleted.
type sweep struct {
	name string
	run  func(ctx context.Context) (int64, error)
}

// sweeps returns what each instance sweeps every SWEEP_INTERVAL: the rows
// of expired links and sessions in the user views; the keys, and all but
// the last event of the sign-in streams, of addresses that asked for no
// link for longer than a link matters; the keys of the addresses that
// changes of address asked for, once the changes can no longer be
// confirmed; the rows and keys of invitations into organizations that
// expired unanswered, which erases their addresses; the mail budgets of
// mailboxes sent nothing for a MAIL_BUDGET_WINDOW; the code and link of
// each buried mail whose link has expired, so that a buried message keeps
// nothing that signs in or joins an organization; and buried messages
// older than OUTBOX_BURIED_RETENTION (kept, when it is 0, until an
// operator discards them).
func (e env) sweeps(db backend.Backend, svcs services) []sweep {
	users := svcs.users
	all := []sweep{
		{name: "expired links and sessions", run: users.Sweep},
		{name: "keys of addresses that asked for no link lately", run: users.ForgetIdleAddresses},
		{name: "keys of the addresses changes of address asked for, once past", run: users.ForgetSettledChanges},
		{name: "expired invitations and their keys", run: svcs.orgs.Sweep},
	}
	budget, err := e.mailBudget(db, users.Keys)
	all = append(all, sweep{name: "mail budgets of mailboxes sent nothing lately", run: func(ctx context.Context) (int64, error) {
		if err != nil {
			return 0, err // Not for a configuration that loaded.
		}
		return budget.Sweep(ctx)
	}})
	// A buried mail's code is kept as long as it works, so that a
	// requeue within that time still delivers a working code: an
	// invitation's for INVITATION_TTL, the undo link of a notice of a
	// changed address for user.UndoTTL, every other's for LINK_TTL.
	lifetimes := map[string]time.Duration{
		mail.TopicOrgInvitation: org.Policy(e.cfg.OrgPolicy).WithDefaults().InvitationTTL,
		mail.TopicEmailChanged:  user.UndoTTL,
	}
	linkTTL := user.Policy(e.cfg.Policy).WithDefaults().LinkTTL
	all = append(all, sweep{name: "codes of buried mail whose link expired", run: func(ctx context.Context) (int64, error) {
		var n int64
		for _, topic := range mail.Topics {
			lifetime, ok := lifetimes[topic]
			if !ok {
				lifetime = linkTTL
			}
			redacted, err := db.Outbox().RedactBuried(ctx, topic, mail.SecretFields, time.Now().Add(-lifetime))
			n += redacted
			if err != nil {
				return n, fmt.Errorf("%s: %w", topic, err)
			}
		}
		return n, nil
	}})
	if retention := e.cfg.BuriedRetention; retention > 0 {
		all = append(all, sweep{name: "buried messages past their retention", run: func(ctx context.Context) (int64, error) {
			return db.Outbox().DiscardBuried(ctx, "", time.Now().Add(-retention))
		}})
	}
	return all
}

// runSweeps runs each sweep at once and then every interval until ctx
// ends. Each instance runs its own: a sweep deletes what has expired by
// its time, so two at once only repeat each other's deletes. A sweep that
// fails is logged and tried again at the next interval; nothing waits on
// it.
func runSweeps(ctx context.Context, interval time.Duration, log *slog.Logger, sweeps []sweep) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		for _, s := range sweeps {
			n, err := s.run(ctx)
			// What a sweep deleted is logged even when the app is
			// stopping: it is done.
			if n > 0 {
				log.Info("swept", "sweep", s.name, "rows", n)
			}
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				log.Warn("sweep failed; trying again at the next interval", "sweep", s.name, "error", err, "interval", interval)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
