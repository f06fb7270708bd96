package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/pathseg"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/destinations"
	"github.com/hookgate/hookgate/sender/intake"
)

// listDestinations serves GET /hookgate/destinations: the configured
// destinations, then the orphans.
func (h *Handler) listDestinations(w http.ResponseWriter, r *http.Request) error {
	all, err := h.ops.Destinations(r.Context())
	if err != nil {
		return err
	}
	tenant, filtered := r.URL.Query()["tenant"]
	out := make([]sender.DestinationStatus, 0, len(all))
	for _, d := range all {
		if filtered && d.Tenant != tenant[0] {
			continue
		}
		d.Source = h.source(d.Name, d.State)
		out = append(out, d)
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"destinations": out})
}

// source is where the destination name was made: "api", "caddyfile",
// or "" for an orphan.
func (h *Handler) source(name, state string) string {
	switch {
	case state == sender.StateOrphaned:
		return ""
	case h.reg != nil && h.reg.Owns(name):
		return "api"
	}
	return "caddyfile"
}

// Destination is GET /hookgate/destinations/<name>'s answer: its health,
// and for one made through the API, how it was made (never its secret).
type Destination struct {
	Status sender.DestinationStatus `json:"status"`
	API    *destinations.View       `json:"api,omitempty"`
}

// showDestination serves GET /hookgate/destinations/<name>.
func (h *Handler) showDestination(w http.ResponseWriter, r *http.Request, name string) error {
	st, err := h.ops.Destination(r.Context(), name)
	if err != nil {
		return err
	}
	st.Source = h.source(name, st.State)
	out := Destination{Status: st}
	if h.reg != nil {
		v, ok, err := h.reg.Get(r.Context(), name)
		if err != nil {
			return err
		}
		if ok {
			out.API = &v
		}
	}
	return WriteJSON(w, http.StatusOK, out)
}

// registry is the API's destinations, or an error when none can be made.
func (h *Handler) registry() (*destinations.Registry, error) {
	if h.reg == nil {
		return nil, Errorf(problem.NoSender, "destinations cannot be made through the API here: no sender runs")
	}
	return h.reg, nil
}

// createDestination serves POST /hookgate/destinations: 201 with the
// destination and, this once, its secret.
func (h *Handler) createDestination(w http.ResponseWriter, r *http.Request) error {
	reg, err := h.registry()
	if err != nil {
		return err
	}
	var in destinations.Spec
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	v, err := reg.Create(r.Context(), in)
	if err != nil {
		return err
	}
	h.logger.Info("destination created", "destination", v.Name, "by", by(r))
	w.Header().Set("Cache-Control", "no-store") // it holds the secret
	return WriteJSON(w, http.StatusCreated, v)
}

// updateDestination serves PATCH /hookgate/destinations/<name>.
func (h *Handler) updateDestination(w http.ResponseWriter, r *http.Request, name string) error {
	reg, err := h.registry()
	if err != nil {
		return err
	}
	var in struct {
		destinations.Patch
		Name   json.RawMessage `json:"name"`
		Scheme json.RawMessage `json:"scheme"`
		Secret json.RawMessage `json:"secret"`
	}
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	switch {
	case in.Secret != nil:
		return Errorf(problem.BadRequest, "the secret is not patched: rotate it (POST /hookgate/destinations/%s/rotate)", pathseg.Escape(name))
	case in.Name != nil || in.Scheme != nil:
		return Errorf(problem.BadRequest, "the name and the scheme are not patched: create another destination")
	}
	v, err := reg.Update(r.Context(), name, in.Patch)
	if err != nil {
		return err
	}
	h.logger.Info("destination updated", "destination", name, "by", by(r))
	return WriteJSON(w, http.StatusOK, v)
}

// rotateDestination serves POST /hookgate/destinations/<name>/rotate:
// the new secret, the previous one signing beside it until
// expire_previous_after (default 24h) has passed.
func (h *Handler) rotateDestination(w http.ResponseWriter, r *http.Request, name string) error {
	reg, err := h.registry()
	if err != nil {
		return err
	}
	var in struct {
		ExpirePreviousAfter *string `json:"expire_previous_after"`
		Secret              string  `json:"secret"`
	}
	if r.ContentLength != 0 {
		if err := decodeBody(r, &in); err != nil {
			return err
		}
	}
	expire := destinations.DefaultExpirePrevious
	if in.ExpirePreviousAfter != nil {
		if expire, err = time.ParseDuration(*in.ExpirePreviousAfter); err != nil || expire < 0 {
			return Errorf(problem.BadRequest, "expire_previous_after: want a duration, such as 24h or 0s")
		}
	}
	v, err := reg.Rotate(r.Context(), name, in.Secret, expire)
	if err != nil {
		return err
	}
	h.logger.Info("destination secret rotated", "destination", name, "previous_expires_at", v.PreviousExpiresAt, "by", by(r))
	w.Header().Set("Cache-Control", "no-store")
	return WriteJSON(w, http.StatusOK, v)
}

// Deleted is DELETE /hookgate/destinations/<name>'s answer: what became
// of its envelopes.
type Deleted struct {
	Name string `json:"name"`
	// Purged counts the envelopes deleted (envelopes=purge); Moved and
	// Kept, those moved to another destination and those kept because it
	// holds their IDs with another payload (envelopes=move:<other>).
	Purged int `json:"purged"`
	Moved  int `json:"moved"`
	Kept   int `json:"kept"`
}

// deleteDestination serves DELETE /hookgate/destinations/<name>: a
// destination that holds envelopes needs ?envelopes=purge or
// move:<other>, else 409 destination_not_empty naming the counts.
func (h *Handler) deleteDestination(w http.ResponseWriter, r *http.Request, name string) error {
	reg, err := h.registry()
	if err != nil {
		return err
	}
	choice := r.URL.Query().Get("envelopes")
	to, move := strings.CutPrefix(choice, "move:")
	switch {
	case choice != "" && choice != "purge" && !move:
		return Errorf(problem.BadRequest, "envelopes: want purge or move:<destination>")
	case move && (to == "" || to == name):
		return Errorf(problem.BadRequest, "envelopes=move:<destination>: name another destination")
	case move && !h.ops.Configured(to):
		return Errorf(problem.UnknownDestination, "envelopes=move:%s: no destination %q", to, to)
	}
	if !reg.Owns(name) {
		if h.ops.Configured(name) {
			return Errorf(problem.DestinationStatic, "destination %q is configured in the Caddyfile: remove it there", name)
		}
		return fmt.Errorf("%w: %q", destinations.ErrNotFound, name)
	}
	// A destination left out (its record does not open) is counted as
	// the store holds it, as one applied is.
	depth, err := h.ops.Held(r.Context(), name)
	if err != nil {
		return err
	}
	held := 0
	var counts []string
	for _, k := range []string{"queued", "leased", "dead", "corrupt"} {
		if n := depth[k]; n > 0 {
			held += n
			counts = append(counts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if held > 0 && choice == "" {
		return Errorf(problem.DestinationNotEmpty, "destination %q holds %s: choose what becomes of them: envelopes=purge, or envelopes=move:<destination> (the CLI's --envelopes)",
			name, strings.Join(counts, ", "))
	}
	if err := reg.Delete(r.Context(), name); err != nil {
		return err
	}
	out := Deleted{Name: name}
	who := by(r)
	h.logger.Info("destination deleted", "destination", name, "envelopes", choice, "by", who)
	// What the store keeps of it goes too, its history and first-seen
	// time with it (moved along, for a move): a destination made again
	// under the name starts afresh.
	if move {
		out.Moved, out.Kept, err = h.ops.MoveOrphan(r.Context(), name, to, who)
	} else {
		out.Purged, err = h.ops.PurgeOrphan(r.Context(), name, who)
	}
	if errors.Is(err, sender.ErrUnknownDestination) {
		err = nil // the store held nothing of it
	}
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, out)
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
	case "pause", "resume", "enable":
		set := func() (sender.DestinationStatus, error) {
			return h.ops.SetPaused(r.Context(), name, action == "pause", by(r))
		}
		if action == "enable" {
			set = func() (sender.DestinationStatus, error) { return h.ops.Enable(r.Context(), name, by(r)) }
		}
		v, err := set()
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, v)
	case "enqueue":
		intake.ServeJSON(w, r, h.ops, name, maxBody, h.logger)
		return nil
	}
	return Errorf(problem.NotFound, "no such action %q: pause, resume, enable, enqueue, move or purge", action)
}

// publish serves POST /hookgate/events: the event fanned out to the
// destinations subscribed to its type, through package intake.
func (h *Handler) publish(w http.ResponseWriter, r *http.Request) error {
	intake.ServeJSON(w, r, h.ops, "", maxBody, h.logger)
	return nil
}
