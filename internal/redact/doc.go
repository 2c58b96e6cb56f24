// Package redact takes personal data out of text that is kept where an
// erasure does not reach: the errors that end up in log lines and in an
// outbox message's stored reason, when their text comes from another
// system (a mail server's reply, a webhook endpoint's answer) that may
// quote what it was sent.
package redact
