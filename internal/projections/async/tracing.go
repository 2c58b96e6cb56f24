package async

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
)

// tracerName is the instrumentation scope of the runner's spans.
const tracerName = meterName

// The attributes of a batch's span.
const (
	attrName    = attribute.Key("projection.name")
	attrVersion = attribute.Key("projection.version")
	attrGroup   = attribute.Key("projection.group")
	// attrEvents counts the events handed to the projection: the batch's,
	// or those of it still to apply when it is handed over again.
	attrEvents = attribute.Key("projection.batch.events")
	// attrFirst and attrLast are the positions ([projections.FormatPosition])
	// of the first and last of those events; attrEnd is the window's end,
	// where the group's offset moves.
	attrFirst = attribute.Key("projection.batch.first")
	attrLast  = attribute.Key("projection.batch.last")
	attrEnd   = attribute.Key("projection.batch.end")
	attrTry   = attribute.Key("projection.try")
	// attrFailedEvent and attrFailedPosition name the event that could
	// not be applied.
	attrFailedEvent    = attribute.Key("projection.failed.event_id")
	attrFailedPosition = attribute.Key("projection.failed.position")
)

// startBatch starts the span of one batch of group's handler, a child of
// the span in ctx, if any, and returns the context that carries it.
func startBatch(ctx context.Context, tr trace.Tracer, p projections.Projection, group, end string) (context.Context, trace.Span) {
	return tr.Start(ctx, "apply "+p.Name(), trace.WithAttributes(
		attrName.String(p.Name()),
		attrVersion.Int(p.Version()),
		attrGroup.String(group),
		attrEvents.Int(0),
		attrEnd.String(end),
	))
}

// batchEvents notes on span the events handed to the projection.
func batchEvents(span trace.Span, events []eventstore.Event) {
	span.SetAttributes(
		attrEvents.Int(len(events)),
		attrFirst.String(projections.FormatPosition(events[0].Position)),
		attrLast.String(projections.FormatPosition(events[len(events)-1].Position)),
	)
}

// failBatch marks span failed at e with err's type, and with no word of
// err's text: a projection's error can quote what the event holds, such
// as an address, and span attributes are kept where an erasure does not
// reach. The text is in the runner's log and [projections.Failure].
func failBatch(span trace.Span, e eventstore.Event, try int, err error) {
	what := "apply failed"
	if errors.Is(err, uow.ErrUnavailable) {
		what = "database unavailable"
	}
	span.SetStatus(codes.Error, what)
	span.SetAttributes(semconv.ErrorType(err), attrTry.Int(try))
	if e.ID != uuid.Nil {
		span.SetAttributes(attrFailedEvent.String(e.ID.String()))
	}
	span.SetAttributes(attrFailedPosition.String(projections.FormatPosition(e.Position)))
}
