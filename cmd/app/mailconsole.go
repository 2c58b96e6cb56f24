package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// printMailOn makes w, if it is a terminal, where mail is printed when
// SMTP_URL is unset, and says in the log where mail goes. Mail is never
// written to the log: a log is kept, shipped and searched, and the code a
// mail carries signs its reader in. A terminal is read by the person at
// it; a standard output that is no terminal (a container's, a pipe, a
// file) is as good as a log, so there mail is not sent at all, but
// retried and buried, for `app outbox requeue` once SMTP_URL is set.
func (e *env) printMailOn(w io.Writer) {
	if e.cfg.SMTPURL != "" {
		return
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		e.mailOut = w
		e.log.Info("mail: SMTP_URL is unset: each mail is printed on the terminal, not sent")
		return
	}
	e.log.Warn("mail: SMTP_URL is unset and standard output is no terminal: no mail is sent, each is retried and then buried; set SMTP_URL (app devmail catches mail on this machine)")
}
