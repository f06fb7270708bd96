package httpapi

import (
	"net/http"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender/intake"
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
		intake.ServeJSON(w, r, h.ops, name, maxBody, h.logger)
		return nil
	}
	return Errorf(problem.NotFound, "no such action %q: pause, resume, enqueue, move or purge", action)
}

// publish serves POST /hookgate/events: the event fanned out to the
// destinations subscribed to its type, through package intake.
func (h *Handler) publish(w http.ResponseWriter, r *http.Request) error {
	intake.ServeJSON(w, r, h.ops, "", maxBody, h.logger)
	return nil
}
