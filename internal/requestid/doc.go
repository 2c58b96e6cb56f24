// Package requestid names one request to the service, so that everything it
// causes can be found again: its response, its log lines, and the outbox
// messages its unit of work added.
//
// An ID travels in a context ([With], [From]). The HTTP server keeps a valid
// incoming [Header] and makes one ([New]) otherwise; [Valid] says which IDs
// are kept: at most [MaxLen] characters of letters, digits and "-_.:+/=",
// so that an ID is safe in any log format and cannot hold an address.
package requestid
