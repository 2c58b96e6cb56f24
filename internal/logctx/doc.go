// Package logctx adds to each log line what its context says of the work
// it belongs to, so that one request's lines can be found together: the
// request's ID as request_id ([requestid.From]), and trace_id and span_id
// when the context holds a valid OpenTelemetry span context.
//
// It is one [slog.Handler] wrapped around the one that writes ([New]), so
// that code logs as it always does and needs only to pass its context
// (Logger.InfoContext and the like); a line logged without one carries
// none of these. A context without them adds nothing.
package logctx
