package mail

import "strings"

// Mailbox returns the mailbox that address reaches: the address in lower
// case, without the subaddress of its local part, from its first "+" to
// the "@" (RFC 5233): "Ada+news@Example.com" and "ada@example.com" both
// reach "ada@example.com". An address without a "+", or whose local part
// begins with one, is its own mailbox. The limits that protect a person
// from mail count a mailbox, not a spelling of it; the mail itself goes to
// the address as it was given.
func Mailbox(address string) string {
	address = strings.ToLower(address)
	at := strings.LastIndexByte(address, '@')
	if at < 0 {
		return address
	}
	local, domain := address[:at], address[at:]
	if plus := strings.IndexByte(local, '+'); plus > 0 {
		local = local[:plus]
	}
	return local + domain
}
