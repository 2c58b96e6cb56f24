// Package pgcluster makes throwaway PostgreSQL clusters on this machine
// with Debian's postgresql-common (pg_createcluster, pg_ctlcluster,
// pg_dropcluster), for the tests and benchmarks that must stop, restart
// or restore into a server of their own instead of the shared one.
//
// A cluster listens on localhost at a free port, trusts local
// connections, runs without TLS and belongs to the postgres user, as
// initdb refuses to run as root. [Create] makes and starts one; [Drop]
// stops and deletes it, data directory included. A cluster whose creating
// process died without dropping it is dropped by the next [Create], so a
// killed run leaves nothing behind for long.
package pgcluster
