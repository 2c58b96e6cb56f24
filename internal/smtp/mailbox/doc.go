// Package mailbox is an SMTP server (emersion/go-smtp) that decodes each
// mail it accepts and hands it to a function: the tests' server
// (smtptest) keeps them, and [Catch], behind `app devmail`, prints them, so
// that the service can be tried with real SMTP on one machine.
package mailbox
