package config

import "time"

// Policy is the domain's [user.Policy] as the environment sets it: the
// same fields, so that user.Policy(p) converts it, with the variables'
// names and meanings. It has no envDefault tags: a variable left unset
// keeps the domain's default, since [Load] starts from
// [user.Policy.WithDefaults], where each default is written, and
// [Describe] shows the defaults from there.
type Policy struct {
	LinkTTL          time.Duration `env:"LINK_TTL" desc:"How long a sign-in or confirmation link works."`
	SessionTTL       time.Duration `env:"SESSION_TTL" desc:"How long a session lasts."`
	LinkLimit        int           `env:"LINK_LIMIT" desc:"Sign-in links one mailbox (an address and its +tag spellings together), or email changes one user, may ask for within LINK_WINDOW."`
	LinkWindow       time.Duration `env:"LINK_WINDOW" desc:"The window LINK_LIMIT counts in."`
	MailBudget       int           `env:"MAIL_BUDGET" desc:"Mails one mailbox (every +tag spelling together) may receive within MAIL_BUDGET_WINDOW, every topic counted; past it, mail is held back (acknowledged, not sent), except sign-in links, which LINK_LIMIT caps."`
	MailBudgetWindow time.Duration `env:"MAIL_BUDGET_WINDOW" desc:"The window MAIL_BUDGET counts in."`
}

// OrgPolicy is the organizations' [org.Policy] as the environment sets
// it, as [Policy] is the user domain's: the same fields, so that
// org.Policy(p) converts it, with no envDefault tags.
type OrgPolicy struct {
	InvitationLimit        int           `env:"INVITATION_LIMIT" desc:"Invitations one organization may send within INVITATION_WINDOW, so that its owners cannot flood inboxes through it; each also counts against the invited mailbox's MAIL_BUDGET."`
	InvitationAccountLimit int           `env:"INVITATION_ACCOUNT_LIMIT" desc:"Invitations one account may send within INVITATION_WINDOW in all its organizations together, deleted ones included, so that it cannot flood inboxes through organizations it makes one after another."`
	InvitationWindow       time.Duration `env:"INVITATION_WINDOW" desc:"The window INVITATION_LIMIT and INVITATION_ACCOUNT_LIMIT count in; at least 1m."`
	InvitationTTL          time.Duration `env:"INVITATION_TTL" desc:"How long an invitation into an organization works, at least 1h; its mail, if buried, keeps its code as long."`
}
