// Package smtp sends mail through an SMTP server, with wneessen/go-mail as
// the client: STARTTLS when the server offers it (or implicit TLS for
// smtps://), authentication when the URL carries a user, and a timeout on
// every exchange.
package smtp
