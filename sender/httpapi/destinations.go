package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

// listDestinations serves GET /hookgate/destinations: the configured
// destinations, then the orphans.
func (h *Handler) listDestinations(w http.ResponseWriter, r *http.Request) error {
	out, err := h.ops.Destinations(r.Context())
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"destinations": out})
}

// destinationAction serves POST /hookgate/destinations/<name>/<action>:
// move and purge of an orphan; pause, resume and enqueue of a configured
// destination.
func (h *Handler) destinationAction(w http.ResponseWriter, r *http.Request, name, action string) error {
	switch action {
	case "move":
		var in struct {
			To string `json:"to"`
		}
		if err := decodeBody(r, &in); err != nil {
			return err
		}
		if in.To == "" {
			return Errorf(problem.BadRequest, "to is required: the configured destination to move the envelopes to")
		}
		moved, kept, err := h.ops.MoveOrphan(r.Context(), name, in.To, by(r))
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, map[string]int{"moved": moved, "kept": kept})
	case "purge":
		n, err := h.ops.PurgeOrphan(r.Context(), name, by(r))
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, map[string]int{"removed": n})
	}
	if !h.ops.Configured(name) {
		return Errorf(problem.UnknownDestination, "no destination %q", name)
	}
	switch action {
	case "pause", "resume":
		v, err := h.ops.SetPaused(r.Context(), name, action == "pause", by(r))
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, v)
	case "enqueue":
		ev, err := eventOf(r)
		if err != nil {
			return err
		}
		h.enqueue(w, r, ev.Envelope(name))
		return nil
	}
	return Errorf(problem.NotFound, "no such action %q: pause, resume, enqueue, move or purge", action)
}

// publish serves POST /hookgate/events: the event fanned out to the
// destinations subscribed to its type.
func (h *Handler) publish(w http.ResponseWriter, r *http.Request) error {
	ev, err := eventOf(r)
	if err != nil {
		return err
	}
	WritePublished(w, r, h.ops.Publish, ev, h.logger)
	return nil
}

// eventOf reads the body of an enqueue or a publish, {"id","event_type",
// "entity","event_time","payload"}, into an event. The payload is JSON
// (the decoder checked it), sent as application/json.
func eventOf(r *http.Request) (*sender.Event, error) {
	var in struct {
		ID        json.RawMessage `json:"id"` // a string: not stringified
		EventType string          `json:"event_type"`
		Entity    string          `json:"entity"`
		EventTime string          `json:"event_time"`
		Payload   json.RawMessage `json:"payload"`
	}
	if err := decodeBody(r, &in); err != nil {
		return nil, err
	}
	var id string
	if len(in.ID) > 0 {
		if v := gjson.ParseBytes(in.ID); v.Type != gjson.String {
			return nil, Errorf(problem.BadID, "id must be a string, not %s", JSONKind(v))
		}
		if err := json.Unmarshal(in.ID, &id); err != nil {
			return nil, Errorf(problem.BadID, "id: %v", err)
		}
	}
	if id == "" {
		return nil, Errorf(problem.MissingIdempotencyKey, "id is required")
	}
	if err := sender.CheckID(id); err != nil {
		return nil, Errorf(problem.BadID, "id: %v", err)
	}
	if len(in.Payload) == 0 {
		return nil, Errorf(problem.BadRequest, "payload is required")
	}
	e := &sender.Event{ID: id, EventType: in.EventType, Entity: in.Entity, Payload: in.Payload, ContentType: "application/json"}
	if in.EventTime != "" {
		t, err := freshness.ParseEventTime(in.EventTime)
		if err != nil {
			return nil, Errorf(problem.MalformedEventTime, "%v", err)
		}
		e.EventTime = t
	}
	return e, nil
}

// enqueueAnswer is an enqueue's 202 body, as webhook_enqueue answers.
type enqueueAnswer struct {
	ID          string `json:"id"`
	Destination string `json:"destination"`
	State       string `json:"state"`
	Duplicate   bool   `json:"duplicate"`
}

// enqueueUnknown is the detail of an enqueue's 503.
const enqueueUnknown = "the queue's store failed or did not answer in time: the outcome is unknown, " +
	"the event may have been enqueued; retry with the same delivery ID, which is safe (the enqueue is idempotent)"

// enqueue enqueues e and answers as webhook_enqueue does.
func (h *Handler) enqueue(w http.ResponseWriter, r *http.Request, e *sender.Envelope) {
	WriteEnqueued(w, r, h.ops.Enqueue, e, h.logger)
}

// WriteEnqueued enqueues e through enqueue and answers: 202 with
// {"id","destination","state","duplicate"}, or a problem (400 bad_id, 422
// key_reused_with_different_payload, 503 store_unavailable whose outcome
// is unknown). webhook_enqueue and the admin API's enqueue answer so.
func WriteEnqueued(w http.ResponseWriter, r *http.Request, enqueue func(context.Context, *sender.Envelope) (sender.EnqueueResult, error), e *sender.Envelope, logger *slog.Logger) {
	res, err := enqueue(r.Context(), e)
	switch {
	case errors.Is(err, sender.ErrBadID):
		problem.Write(w, problem.BadID, err.Error(), 0)
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
	writeAccepted(w, enqueueAnswer{ID: e.ID, Destination: e.Destination, State: string(res.State), Duplicate: res.Duplicate})
}

// writeAccepted answers 202 with v, an enqueue's or a publish's answer.
func writeAccepted(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(append(b, '\n')) // a client gone away has nothing to be told
}

// JSONKind names the kind of a JSON value, for an error: "a number",
// "an object", ...
func JSONKind(v gjson.Result) string {
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
