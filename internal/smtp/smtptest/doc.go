// Package smtptest runs a real SMTP server (emersion/go-smtp, through
// [mailbox]) on loopback for tests, keeps what it receives, and can be told
// to refuse mail or be stopped and started again.
package smtptest
