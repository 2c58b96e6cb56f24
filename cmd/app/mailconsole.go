package main

import (
	"errors"
	"io"
	"os"

	"golang.org/x/term"
)

// errNoMailServer is the error of `app serve` with a relay, no SMTP_URL
// and no terminal: it would claim every mail and never send one.
var errNoMailServer = errors.New("SMTP_URL is unset and standard output is no terminal, so this relay could send no mail: " +
	"set SMTP_URL (app devmail catches mail on this machine), run the app on a terminal to have each mail printed there, " +
	"or set RELAY=false to leave delivery to other instances")

// printMailOn makes w, if it is a terminal, where the relay of `app serve`
// prints mail when SMTP_URL is unset, and says so in the log: a person
// trying the service on their own machine reads the link there. Mail is
// never written to the log: a log is kept, shipped and searched, and the
// code a mail carries signs its reader in. A terminal is read by the
// person at it; a standard output that is no terminal (a container's, a
// pipe, a file, an IDE's) is as good as a log, so there, without SMTP_URL,
// printMailOn returns errNoMailServer and serve does not start: its relay
// would claim each mail and, unable to send it, spend its attempts and
// bury it.
//
// `app outbox drain` never prints mail: an operator's screen is not the
// person's, and a printed mail is deleted as delivered. Without SMTP_URL it
// leaves the mail in the outbox ([env.handlers]).
func (e *env) printMailOn(w io.Writer) error {
	if e.cfg.SMTPURL != "" {
		return nil
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		e.mailOut = w
		e.log.Info("mail: SMTP_URL is unset: each mail is printed on the terminal, not sent")
		return nil
	}
	return errNoMailServer
}
