// Command app is the account service: its HTTP API, its outbox relay, and
// the tools to run, migrate, inspect and measure them.
//
// Usage (app help lists the commands, and -h on any command its flags):
//
//	app [serve]            run the service until SIGINT or SIGTERM
//	app version            print the module version and VCS revision
//	app devmail            a mail catcher on loopback that prints each mail
//	app migrate            apply the database migrations
//	app config             every environment variable: value in effect, from where, meaning
//	app outbox drain       deliver what is due in one synchronous pass
//	app outbox list        list messages: due, waiting and buried
//	app outbox show ID     show one message, its secrets redacted
//	app outbox buried      list buried messages with their reasons
//	app outbox requeue     give buried messages (IDs, or --all) another chance
//	app outbox discard     throw buried messages away
//	app projections rebuild NAME  rebuild the inline views of accounts and organizations (views), or a projection blue/green (activity)
//	app projections status   each asynchronous projection's versions, lag and state
//	app bench drain        measure how fast the relay empties a full outbox
//	app bench latency      measure the time from commit to handler
//	app bench signin       measure sign-in link requests through the API
//	app bench invite       measure invitation rounds: invite, mail, sign in and accept
//	app bench projection   measure how fast the activity projection catches up, or (--lag) how far it trails commits
//	app bench publish      measure how fast integration events reach the configured destination
//	app bench soak         run several instances for a long time under faults, and hold them to a ledger
package main
