// Package testproxy forwards TCP connections on loopback to a server, and
// can cut them and refuse new ones until told otherwise, so that a test can
// make a real server go away and come back without stopping it.
package testproxy
