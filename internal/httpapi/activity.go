package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/user"
)

// ActivityReader is what the API reads of the activity projection:
// [user.ActivityProjection] over the backend's activity store.
type ActivityReader interface {
	// Page returns up to limit items of the account's activity older than
	// before (the newest when nil), newest first, and whether more are
	// older still.
	Page(ctx context.Context, id uuid.UUID, before *eventstore.Position, limit int) ([]user.Activity, bool, error)
	// Behind counts the events the projection has not applied yet.
	Behind(ctx context.Context) (int64, error)
}

// The page sizes of GET /v1/me/activity.
const (
	defaultActivityLimit = 20
	maxActivityLimit     = 100
)

// activityJSON is one item of GET /v1/me/activity.
type activityJSON struct {
	Type   string    `json:"type"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail"`
}

// activityPage is the answer of GET /v1/me/activity. Behind counts the
// events that the projection has not applied yet, so that an empty or short
// page tells "nothing happened" (0) from "not caught up yet".
type activityPage struct {
	Items  []activityJSON `json:"items"`
	Next   *string        `json:"next"`
	Behind int64          `json:"behind"`
}

func handleActivity(users Users, activity ActivityReader, log *slog.Logger) http.HandlerFunc {
	return route(log, withSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		q, err := query(r)
		if err != nil {
			return nil, err
		}
		for name := range q {
			if name != "limit" && name != "before" {
				return nil, badQuery("unknown parameter " + strconv.Quote(name) + "; want limit and before")
			}
		}
		limit := defaultActivityLimit
		if vs, ok := q["limit"]; ok {
			n, err := strconv.Atoi(vs[0])
			if len(vs) > 1 || err != nil || n < 1 || n > maxActivityLimit || vs[0] != strconv.Itoa(n) {
				return nil, badQuery("limit must be a whole number from 1 to 100")
			}
			limit = n
		}
		var before *eventstore.Position
		if vs, ok := q["before"]; ok {
			p, err := user.ParseActivityCursor(vs[0])
			if len(vs) > 1 || err != nil {
				return nil, badQuery("before must be the next cursor of a page")
			}
			before = &p
		}
		u, err := users.Me(r.Context(), token)
		if err != nil {
			return nil, err
		}
		behind, err := activity.Behind(r.Context())
		if err != nil {
			return nil, err
		}
		items, more, err := activity.Page(r.Context(), u.ID, before, limit)
		if err != nil {
			return nil, err
		}
		page := activityPage{Items: make([]activityJSON, len(items)), Behind: behind}
		for i, it := range items {
			page.Items[i] = activityJSON{Type: it.Type, At: it.At.UTC(), Detail: it.Detail}
		}
		if more {
			next := user.ActivityCursor(items[len(items)-1].Position)
			page.Next = &next
		}
		return page, nil
	})
}
