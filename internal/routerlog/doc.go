// Package routerlog adapts slog to the logger of Watermill's routers and
// subscribers.
//
// [New] returns a watermill.LoggerAdapter that writes to a *slog.Logger,
// says at Debug what a router says at Info, and costs nothing for a level
// the slog handler would not write.
package routerlog
