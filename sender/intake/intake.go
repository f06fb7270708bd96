// Package intake is the sender's way in: it reads an inbound event, hands
// it to the sender, and answers. webhook_enqueue (Serve, over the request
// body and the handler's placeholders) and the admin API's POST
// /hookgate/events and POST /hookgate/destinations/{name}/enqueue
// (ServeJSON, over {"id","event_type","entity","event_time","payload"})
// come in through it and answer alike: 202 with the envelope's state, or
// problem+json with a reason code. webhook_enqueue also keeps what its
// Options say of the request (durable ingress, ingress.go).
//
// The path runs one way: the caller's adapter calls intake, intake calls
// the sender. The delivery ID is checked once, by the sender (Enqueue and
// Publish refuse a bad one with sender.ErrBadID). The package imports no
// Caddy and no admin API.
package intake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/propagation"

	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/verify"
)

// Sender takes the events: *sender.Sender, or *sender.Ops for the admin
// API's door.
type Sender interface {
	Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error)
	Publish(ctx context.Context, ev *sender.Event) (sender.PublishResult, error)
}

// Inbound is a request to webhook_enqueue as its handler read it: the
// body, and the handler's placeholders resolved.
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
	// Tenant is the tenant placeholder resolved: a fan-out reaches its
	// subscribers only; "" those of no tenant. TenantRequired (a tenant
	// placeholder is configured) refuses one that resolves to nothing:
	// never the destinations of no tenant by default.
	Tenant         string
	TenantRequired bool
	// Verified is what webhook_verify in front made of the request (its
	// scheme, its credential headers); nil without one.
	Verified *verify.Delivery
}

// Serve reads in's event from r, a POST (else 405), carrying the trace of
// r's context and what opts keep of r, and queues it through s for dest,
// or fans it out by its type when dest is "" (an event type that resolves
// to nothing is 400 missing_event_type); it answers as opts say, or 202,
// or a problem (see Refusal, Options.Received, Enqueue and Publish).
func Serve(w http.ResponseWriter, r *http.Request, s Sender, in *Inbound, dest string, opts *Options, logger *slog.Logger) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		problem.Write(w, problem.MethodNotAllowed, "webhook_enqueue takes POST, not "+problem.Truncate(r.Method, 40), 0)
		return
	}
	ev, err := in.Event()
	if err == nil {
		var source string
		var creds []string
		if in.Verified != nil {
			source, creds = in.Verified.Scheme, in.Verified.Credentials
		}
		ev.Received, err = opts.Received(r, source, creds)
	}
	if err != nil {
		writeRefusal(w, err)
		return
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(r.Context(), carrier)
	ev.TraceParent, ev.TraceState = carrier["traceparent"], carrier["tracestate"]
	submit(w, r, s, ev, dest, opts, logger)
}

// ServeJSON reads the admin API's event, {"id","event_type","entity",
// "event_time","payload"} (at most maxBody bytes; an unknown field is
// refused), and queues it through s as Serve does. The payload is JSON
// (the decoder checked it), sent as application/json.
func ServeJSON(w http.ResponseWriter, r *http.Request, s Sender, dest string, maxBody int64, logger *slog.Logger) {
	ev, err := decode(r, maxBody)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	submit(w, r, s, ev, dest, nil, logger)
}

func submit(w http.ResponseWriter, r *http.Request, s Sender, ev *sender.Event, dest string, opts *Options, logger *slog.Logger) {
	if dest == "" {
		publish(w, r, s, ev, opts, logger)
		return
	}
	if ev.Tenant != "" && sender.TenantOf(dest) != ev.Tenant {
		problem.Write(w, problem.BadTenant, fmt.Sprintf("the event is tenant %q's, and destination %q is not: a tenant's destination is named <tenant>/<name>",
			problem.Truncate(ev.Tenant, 80), dest), 0)
		return
	}
	enqueue(w, r, s, ev.Envelope(dest), opts, logger)
}

// CheckRoute refuses a webhook_enqueue to dest, among dests, that could
// route nothing: a named destination must be one of dests; without one,
// the event fans out by its type, so it needs eventType, and a
// destination that subscribes to some.
func CheckRoute(dest, eventType string, dests []sender.Destination) error {
	switch {
	case dest == "" && eventType == "":
		return errors.New("webhook_enqueue without a destination fans out by event type: it needs event_type, e.g. event_type {webhook.json.type}")
	case dest == "" && !slices.ContainsFunc(dests, func(d sender.Destination) bool { return len(d.Events) > 0 }):
		return errors.New("webhook_enqueue without a destination fans out by event type, but no destination of the hookgate global option subscribes to any: give destinations events <glob>..., or name a destination")
	case dest != "" && !slices.ContainsFunc(dests, func(d sender.Destination) bool { return d.Name == dest }):
		return fmt.Errorf("webhook_enqueue: destination %q is not configured in the hookgate global option", dest)
	}
	return nil
}

// Refusal is an inbound event refused before it reaches the sender,
// answered as problem+json with its reason code.
type Refusal struct {
	Reason problem.Reason
	Err    error
}

func (e *Refusal) Error() string { return e.Err.Error() }

func refuse(reason problem.Reason, format string, args ...any) error {
	return &Refusal{Reason: reason, Err: fmt.Errorf(format, args...)}
}

func writeRefusal(w http.ResponseWriter, err error) {
	var ref *Refusal
	if !errors.As(err, &ref) {
		ref = &Refusal{Reason: problem.BadRequest, Err: err}
	}
	problem.Write(w, ref.Reason, ref.Err.Error(), 0)
}

// Event checks the request and makes its event, or refuses it with a
// *Refusal (400 empty_payload, malformed_json, missing_idempotency_key,
// bad_id for a body "id" that is not a string, or malformed_event_time).
// A body sent as JSON (application/json, application/*+json, no
// Content-Type) or holding the ID must be valid JSON. The ID's form is
// the sender's to check.
func (in *Inbound) Event() (*sender.Event, error) {
	if len(in.Body) == 0 {
		return nil, refuse(problem.EmptyPayload, "the body is empty: it is the event's payload")
	}
	contentType := in.ContentType
	if contentType == "" {
		contentType = "application/json"
	}
	if (in.MustBeJSON || in.IDFromBody || isJSONType(contentType)) && !json.Valid(in.Body) {
		return nil, refuse(problem.MalformedJSON, "the body is not valid JSON (its Content-Type is %s, or the delivery ID is read from it)", problem.Truncate(contentType, 80))
	}
	id := in.ID
	if in.IDFromBody {
		v := gjson.GetBytes(in.Body, "id")
		if v.Exists() && v.Type != gjson.String {
			return nil, refuse(problem.BadID, "the body's \"id\" is %s, not a string", jsonKind(v))
		}
		id = v.String()
	}
	if id == "" {
		return nil, refuse(problem.MissingIdempotencyKey, "a delivery ID is required: an Idempotency-Key header, the body's \"id\", or the id placeholder")
	}
	if in.TenantRequired && in.Tenant == "" {
		return nil, refuse(problem.BadTenant, "the tenant placeholder resolved to nothing: the event names no tenant")
	}
	ev, err := newEvent(id, in.EventType, in.Entity, in.EventTime, in.Body, contentType)
	if ev != nil {
		ev.Tenant = in.Tenant
	}
	return ev, err
}

// decode reads the admin API's event from r's body.
func decode(r *http.Request, maxBody int64) (*sender.Event, error) {
	var in struct {
		ID        json.RawMessage `json:"id"` // a string: not stringified
		EventType string          `json:"event_type"`
		Entity    string          `json:"entity"`
		EventTime string          `json:"event_time"`
		Tenant    string          `json:"tenant"`
		Payload   json.RawMessage `json:"payload"`
	}
	d := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		return nil, refuse(problem.BadRequest, "request body: %v", err)
	}
	var id string
	if len(in.ID) > 0 {
		if v := gjson.ParseBytes(in.ID); v.Type != gjson.String {
			return nil, refuse(problem.BadID, "id must be a string, not %s", jsonKind(v))
		}
		if err := json.Unmarshal(in.ID, &id); err != nil {
			return nil, refuse(problem.BadID, "id: %v", err)
		}
	}
	if id == "" {
		return nil, refuse(problem.MissingIdempotencyKey, "id is required")
	}
	if len(in.Payload) == 0 {
		return nil, refuse(problem.BadRequest, "payload is required")
	}
	ev, err := newEvent(id, in.EventType, in.Entity, in.EventTime, in.Payload, "application/json")
	if ev != nil {
		ev.Tenant = in.Tenant
	}
	return ev, err
}

// newEvent makes an event; its event time, when given, is RFC 3339 or
// unix seconds.
func newEvent(id, eventType, entity, eventTime string, payload []byte, contentType string) (*sender.Event, error) {
	ev := &sender.Event{ID: id, EventType: eventType, Entity: entity, Payload: payload, ContentType: contentType}
	if eventTime != "" {
		t, err := freshness.ParseEventTime(eventTime)
		if err != nil {
			return nil, refuse(problem.MalformedEventTime, "%v", err)
		}
		ev.EventTime = t
	}
	return ev, nil
}

// enqueueAnswer is an enqueue's 202 body.
type enqueueAnswer struct {
	ID          string `json:"id"`
	Destination string `json:"destination"`
	State       string `json:"state"`
	Duplicate   bool   `json:"duplicate"`
}

// enqueueUnknown is the detail of an enqueue's 503.
const enqueueUnknown = "the queue's store failed, did not answer in time, or too few of its replicas acknowledged the write in time (min_replicas): the outcome is unknown, " +
	"the event may have been enqueued; retry with the same delivery ID, which is safe (the enqueue is idempotent)"

// enqueue queues e through s and answers: as opts say (Options.Answer*),
// or 202 with {"id","destination","state","duplicate"}; or a problem (400
// bad_id or entity_too_long, 422 key_reused_with_different_payload, 503 store_unavailable
// whose outcome is unknown).
func enqueue(w http.ResponseWriter, r *http.Request, s Sender, e *sender.Envelope, opts *Options, logger *slog.Logger) {
	res, err := s.Enqueue(r.Context(), e)
	switch {
	case errors.Is(err, sender.ErrBadID):
		problem.Write(w, problem.BadID, err.Error(), 0)
		return
	case errors.Is(err, sender.ErrEntityTooLong):
		problem.Write(w, problem.EntityTooLong, err.Error(), 0)
		return
	case err != nil:
		// The store may have applied the enqueue after it stopped waiting
		// (a hung Redis runs the script when it wakes): the outcome is
		// unknown, never "nothing was enqueued".
		logger.Error("enqueue failed: outcome unknown", "destination", e.Destination, "id", e.ID, "error", err)
		problem.Write(w, problem.StoreUnavailable, enqueueUnknown, time.Second)
		return
	case res.Mismatch:
		problem.Write(w, problem.KeyReusedWithDifferentPayload, "this delivery ID was enqueued with another payload", 0)
		return
	}
	if !opts.answer(w) {
		writeAccepted(w, enqueueAnswer{ID: e.ID, Destination: e.Destination, State: string(res.State), Duplicate: res.Duplicate})
	}
}

// publishAnswer is a fan-out's 202 body: the event's deliveries, one per
// subscribed destination in config order, none when no destination
// subscribes.
type publishAnswer struct {
	ID         string            `json:"id"`
	EventType  string            `json:"event_type"`
	Deliveries []sender.Delivery `json:"deliveries"`
}

// publishUnknown is the detail of a fan-out's 503.
const publishUnknown = "the queue's store failed, did not answer in time, or too few of its replicas acknowledged the write in time (min_replicas): the outcome is unknown, " +
	"the event may have been enqueued for some or all of its destinations; publish it again with the same delivery ID, " +
	"which is safe: it enqueues what is missing and duplicates nothing"

// publish fans ev out through s and answers: as opts say, or 202 with
// {"id","event_type","deliveries":[{"destination","state","duplicate"}]};
// or a problem (400 bad_id, entity_too_long, bad_tenant or missing_event_type, 422
// key_reused_with_different_payload, 503 store_unavailable whose outcome
// is unknown).
func publish(w http.ResponseWriter, r *http.Request, s Sender, ev *sender.Event, opts *Options, logger *slog.Logger) {
	res, err := s.Publish(r.Context(), ev)
	switch {
	case errors.Is(err, sender.ErrBadID):
		problem.Write(w, problem.BadID, err.Error(), 0)
		return
	case errors.Is(err, sender.ErrEntityTooLong):
		problem.Write(w, problem.EntityTooLong, err.Error(), 0)
		return
	case errors.Is(err, sender.ErrBadTenant):
		problem.Write(w, problem.BadTenant, err.Error(), 0)
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
	if opts.answer(w) {
		return
	}
	if res.Deliveries == nil {
		res.Deliveries = []sender.Delivery{} // "deliveries":[], never null
	}
	writeAccepted(w, publishAnswer{ID: ev.ID, EventType: ev.EventType, Deliveries: res.Deliveries})
}

// writeAccepted answers 202 with v, an enqueue's or a publish's answer.
func writeAccepted(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(append(b, '\n')) // a client gone away has nothing to be told
}

// isJSONType reports whether a Content-Type is JSON: application/json or
// application/*+json, parameters aside.
func isJSONType(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// jsonKind names the kind of a JSON value, for an error: "a number",
// "an object", ...
func jsonKind(v gjson.Result) string {
	switch {
	case v.Type == gjson.Number:
		return "a number"
	case v.Type == gjson.True || v.Type == gjson.False:
		return "a boolean"
	case v.Type == gjson.Null:
		return "null"
	case v.IsArray():
		return "an array"
	case v.IsObject():
		return "an object"
	}
	return "a string"
}
