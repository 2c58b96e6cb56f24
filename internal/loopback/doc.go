// Package loopback finds TCP ports on 127.0.0.1 for servers that the tests
// and benchmarks start, stop and start again on the same port.
//
// A port that the kernel hands out for "127.0.0.1:0" comes from its
// ephemeral range, the same range it takes the source ports of outgoing
// connections from: while a server is down, any client on the machine may
// be given its port as a source port, and the server's next start then
// fails with "address already in use". [Port] picks below that range, where
// no outgoing connection is given a port.
package loopback
