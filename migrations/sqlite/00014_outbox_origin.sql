-- +goose Up

-- origin is where a message came from, as JSON: the W3C trace context
-- (traceparent, tracestate) of the span that added it and the ID of the
-- request, so that its delivery joins that trace and its log lines name
-- that request. NULL for a message added outside any span and request,
-- and for those added before this column. It holds no personal data: an
-- erasure deletes it with its message, and a redaction or a requeue
-- leaves it as it is.
ALTER TABLE outbox_messages ADD COLUMN origin TEXT CHECK (origin IS NULL OR json_valid(origin));

-- +goose Down
ALTER TABLE outbox_messages DROP COLUMN origin;
