package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookgate/hookgate/dedupe/freshness"
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
		problem.Write(w, problem.BadID, err.Error(), 0)
		return
	case errors.Is(err, sender.ErrMissingEventType):
		problem.Write(w, problem.MissingEventType, "an event without a destination is routed by its type, and it has none: "+
			"the body's event_type is empty, or webhook_enqueue's event_type placeholder resolved to nothing", 0)
		return
	case err != nil:
		// As an enqueue's: the writes made before the failure stand, and
		// one the store applied after it stopped waiting may too.
		logger.Error("fan-out failed: outcome unknown", "event_type", ev.EventType, "id", ev.ID, "error", err)
		problem.Write(w, problem.StoreUnavailable, publishUnknown, time.Second)
		return
	case res.Mismatch:
		problem.Write(w, problem.KeyReusedWithDifferentPayload, "this delivery ID was enqueued with another payload", 0)
		return
	}
	if res.Deliveries == nil {
		res.Deliveries = []sender.Delivery{} // "deliveries":[], never null
	}
	writeAccepted(w, publishAnswer{ID: ev.ID, EventType: ev.EventType, Deliveries: res.Deliveries})
}

// Inbound is a request to webhook_enqueue as its handler read it: the
// body, and the handler's placeholders resolved. Event makes the event of
// it, or refuses it.
type Inbound struct {
	Body []byte
	// ContentType is the request's; "" is application/json.
	ContentType string
	// ID is the delivery ID the request names: the id placeholder
	// resolved ("" when it resolves to nothing), or the Idempotency-Key
	// header. With IDFromBody (neither is given), it is the body's "id",
	// which must be a JSON string: a number is not made one.
	ID         string
	IDFromBody bool
	// MustBeJSON is set when the id placeholder reads the body
	// ({webhook.json.<path>}): the body must then be valid JSON whatever
	// its Content-Type.
	MustBeJSON bool
	// EventType, Entity and EventTime are the placeholders resolved; the
	// event time is RFC 3339 or unix seconds.
	EventType, Entity, EventTime string
}

// Event checks the request and makes its event, or answers why not with
// an Error (400 empty_payload, malformed_json, missing_idempotency_key,
// bad_id or malformed_event_time). A body sent as JSON
// (application/json, application/*+json, no Content-Type) or holding the
// ID must be valid JSON.
func (in *Inbound) Event() (*sender.Event, error) {
	if len(in.Body) == 0 {
		return nil, Errorf(problem.EmptyPayload, "the body is empty: it is the event's payload")
	}
	contentType := in.ContentType
	if contentType == "" {
		contentType = "application/json"
	}
	if (in.MustBeJSON || in.IDFromBody || isJSONType(contentType)) && !json.Valid(in.Body) {
		return nil, Errorf(problem.MalformedJSON, "the body is not valid JSON (its Content-Type is %s, or the delivery ID is read from it)", problem.Truncate(contentType, 80))
	}
	id := in.ID
	if in.IDFromBody {
		v := gjson.GetBytes(in.Body, "id")
		if v.Exists() && v.Type != gjson.String {
			return nil, Errorf(problem.BadID, "the body's \"id\" is %s, not a string", JSONKind(v))
		}
		id = v.String()
	}
	if id == "" {
		return nil, Errorf(problem.MissingIdempotencyKey, "a delivery ID is required: an Idempotency-Key header, the body's \"id\", or the id placeholder")
	}
	if err := sender.CheckID(id); err != nil {
		return nil, Errorf(problem.BadID, "%v", err)
	}
	ev := &sender.Event{ID: id, EventType: in.EventType, Entity: in.Entity, Payload: in.Body, ContentType: contentType}
	if in.EventTime != "" {
		t, err := freshness.ParseEventTime(in.EventTime)
		if err != nil {
			return nil, Errorf(problem.MalformedEventTime, "%v", err)
		}
		ev.EventTime = t
	}
	return ev, nil
}

// isJSONType reports whether a Content-Type is JSON: application/json or
// application/*+json, parameters aside.
func isJSONType(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
