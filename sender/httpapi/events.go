package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

// publishAnswer is a fan-out's 202 body, as webhook_enqueue without a
// destination answers: the event's deliveries, one per subscribed
// destination in config order, none when no destination subscribes.
type publishAnswer struct {
	ID         string            `json:"id"`
	EventType  string            `json:"event_type"`
	Deliveries []sender.Delivery `json:"deliveries"`
}

// publishUnknown is the detail of a fan-out's 503.
const publishUnknown = "the queue's store failed or did not answer in time: the outcome is unknown, " +
	"the event may have been enqueued for some or all of its destinations; publish it again with the same delivery ID, " +
	"which is safe: it enqueues what is missing and duplicates nothing"

// WritePublished fans ev out through publish and answers: 202 with
// {"id","event_type","deliveries":[{"destination","state","duplicate"}]},
// or a problem (400 bad_id or missing_event_type, 422
// key_reused_with_different_payload, 503 store_unavailable whose outcome
// is unknown). webhook_enqueue without a destination and the admin API's
// POST /hookgate/events answer so.
func WritePublished(w http.ResponseWriter, r *http.Request, publish func(context.Context, *sender.Event) (sender.PublishResult, error), ev *sender.Event, logger *slog.Logger) {
	res, err := publish(r.Context(), ev)
	switch {
	case errors.Is(err, sender.ErrBadID):
		problem.Write(w, http.StatusBadRequest, "bad_id", err.Error(), 0)
		return
	case errors.Is(err, sender.ErrMissingEventType):
		problem.Write(w, http.StatusBadRequest, "missing_event_type", "an event without a destination is routed by its type, and it has none", 0)
		return
	case err != nil:
		// As an enqueue's: the writes made before the failure stand, and
		// one the store applied after it stopped waiting may too.
		logger.Error("fan-out failed: outcome unknown", "event_type", ev.EventType, "id", ev.ID, "error", err)
		problem.Write(w, http.StatusServiceUnavailable, "store_unavailable", publishUnknown, time.Second)
		return
	case res.Mismatch:
		problem.Write(w, http.StatusUnprocessableEntity, "key_reused_with_different_payload", "this delivery ID was enqueued with another payload", 0)
		return
	}
	if res.Deliveries == nil {
		res.Deliveries = []sender.Delivery{} // "deliveries":[], never null
	}
	writeAccepted(w, publishAnswer{ID: ev.ID, EventType: ev.EventType, Deliveries: res.Deliveries})
}
