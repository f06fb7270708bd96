package console

// The Deliveries page: the delivery history (what was delivered, and
// what died), searched by delivery ID or entity, newest first; an
// envelope's detail; a resend, previewed then confirmed as a redrive is;
// and a chart of the last hour's outcomes per minute.

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

// chartCap bounds the history entries the chart reads per page load;
// past it the chart shows the newest chartCap and says so. chartPage is
// how many it asks for per call.
const (
	chartCap  = 5000
	chartPage = 500
)

// historyQueryOf reads a history search from a form or a query: in a
// scoped view the destination is always the scope's.
func historyQueryOf(v View, q url.Values) (sender.HistoryQuery, error) {
	h := sender.HistoryQuery{Destination: q.Get("destination"), ID: q.Get("id"), Entity: q.Get("entity"), State: sender.State(q.Get("state"))}
	switch {
	case v.Scope.Destination != "":
		h.Destination = v.Scope.Destination
	case v.Scope.Tenant != "":
		h.Tenant = v.Scope.Tenant
	}
	if h.State != "" && h.State != sender.StateDelivered && h.State != sender.StateDead {
		return h, refuse(problem.BadRequest, "state: want delivered or dead, got %q", h.State)
	}
	return h, nil
}

// historyValues is q as form values (the fields a search sets).
func historyValues(q sender.HistoryQuery) url.Values {
	vals := url.Values{}
	for k, s := range map[string]string{"destination": q.Destination, "id": q.ID, "entity": q.Entity, "state": string(q.State)} {
		if s != "" {
			vals.Set(k, s)
		}
	}
	return vals
}

// deliveries is the history search: a page of what q matches, newest
// first, with the chart of the last hour on the first page. A page the
// service answered short (it looks at a bounded number of entries) links
// to the older ones, even when it holds none: never "No deliveries
// match" while older ones may.
func (c *Console) deliveries(w http.ResponseWriter, r *http.Request, v View) error {
	qv := r.URL.Query()
	q, err := historyQueryOf(v, qv)
	if err != nil {
		return err
	}
	cursor := qv.Get("cursor")
	entries, next, err := c.svc.History(r.Context(), q, cursor, c.PageSize)
	if err != nil {
		return err
	}
	var ch *chart
	if cursor == "" {
		if ch, err = c.chart(r.Context(), q.Destination, q.Tenant); err != nil {
			return err
		}
	}
	var dests []string
	if v.Scope.Destination == "" {
		ds, err := c.destinations(r.Context(), v)
		if err != nil {
			return err
		}
		for _, d := range ds {
			dests = append(dests, d.Name)
		}
	}
	var nextQuery template.URL
	if next != "" {
		nq := historyValues(q)
		nq.Set("cursor", next)
		nextQuery = template.URL(nq.Encode())
	}
	c.render(w, r, v, http.StatusOK, "deliveries", "Deliveries", map[string]any{
		"Q": q, "Entries": entries, "Next": nextQuery, "Destinations": dests, "Chart": ch,
		// A search narrowed to an ID or an entity may be resent from the list.
		"Resendable": len(entries) > 0 && (q.ID != "" || q.Entity != ""),
		"Limit":      min(10, c.MaxRedrive), "MaxRedrive": c.MaxRedrive,
	})
	return nil
}

// delivery is one envelope of the history (or still in the queue): its
// state and times, its attempt log, its payload and what durable ingress
// kept of its request while kept, and the resend button.
func (c *Console) delivery(w http.ResponseWriter, r *http.Request, v View, id string) error {
	dest, err := v.destination(r.URL.Query().Get("destination"))
	if err != nil {
		return err
	}
	e, state, err := c.svc.Delivery(r.Context(), dest, id)
	if errors.Is(err, sender.ErrNotFound) {
		return refuse(problem.NotFound, "no such delivery: it may be past the history's retention")
	}
	if err != nil {
		return err
	}
	// HeaderSent reads no store: it tells a destination no longer
	// configured (an orphan), whose envelopes cannot be resent.
	_, herr := c.svc.HeaderSent(e)
	orphaned := errors.Is(herr, sender.ErrUnknownDestination)
	var settled time.Time
	switch {
	case state == sender.StateDead:
		settled = e.DeadAt
	case state == sender.StateDelivered && len(e.Log) > 0:
		settled = e.Log[len(e.Log)-1].At
	}
	payload, note := "", "expired: the history no longer keeps it"
	if !e.PayloadExpired {
		payload, note = showPayload(e.Payload)
	}
	settledState := state == sender.StateDelivered || state == sender.StateDead
	c.render(w, r, v, http.StatusOK, "delivery", "Delivery "+e.ID, map[string]any{
		"E": e, "State": string(state), "Settled": settled, "Orphaned": orphaned,
		"Payload": payload, "PayloadNote": note, "Received": receivedOf(e.Received),
		"Resendable": settledState && !e.PayloadExpired && !orphaned,
	})
	return nil
}

// resend is the resend of a history search: without confirm=yes it
// previews (a dry run: how many match, how many would go) and issues the
// confirm form's one-time token; with it, confirm sends them.
func (c *Console) resend(w http.ResponseWriter, r *http.Request, v View) error {
	q, err := historyQueryOf(v, r.PostForm) // Serve parsed the form
	if err != nil {
		return err
	}
	if q.ID == "" && q.Entity == "" {
		return refuse(problem.BadRequest, "a resend from the console names a delivery ID or an entity")
	}
	limit, err := c.limitOf(r)
	if err != nil {
		return err
	}
	// Serve checked that the form's CSRF token is the cookie's.
	fp := resendBinding(v, q, limit, r.PostForm.Get("csrf"))
	return c.twoStep(w, r, v, batch{fp: fp, noun: "delivery"}, limit, func(ctx context.Context, dryRun bool) (*sender.Redrive, error) {
		return c.svc.Resend(ctx, q, limit, v.By, dryRun)
	}, func(rd *sender.Redrive, moves int, once string) {
		c.render(w, r, v, http.StatusOK, "resend", "Confirm the resend", map[string]any{
			"Q": q, "Limit": limit, "Matched": rd.Matched, "More": rd.More, "Moves": moves,
			"Query": template.URL(historyValues(q).Encode()), "Once": once, "Lapse": int(ConfirmTTL.Minutes()),
		})
	})
}

// chart is the deliveries per minute of the last hour, by outcome, laid
// out as an SVG bar chart.
type chart struct {
	Bars                 []chartBar
	Ticks                []chartTick
	Delivered, Dead, Max int
	// More is set when the history held more than Cap entries in the
	// hour: the chart shows the newest Cap.
	More bool
	Cap  int
	W, H int // the SVG's size
	// Left and Base are where the bars start and stand.
	Left, Base int
}

// chartBar is one minute's bar: delivered stacked on dead.
type chartBar struct {
	Minute                 string
	Delivered, Dead        int
	X, W                   float64
	DeadY, DeadH           float64
	DeliveredY, DeliveredH float64
}

// chartTick is a label under the bars.
type chartTick struct {
	X     float64
	Label string
}

// The chart's geometry, in SVG units.
const (
	chartW, chartH   = 720, 140
	chartLeft        = 36 // room for the scale
	chartBottom      = 18 // room for the time labels
	chartMinutes     = 60
	chartBarFraction = 0.8
)

// chart reads the last hour's history of dest ("" for every destination,
// or every one of tenant's), at most chartCap entries, newest first, and counts them
// per minute.
func (c *Console) chart(ctx context.Context, dest, tenant string) (*chart, error) {
	now := c.now()
	from := now.Truncate(time.Minute).Add(-(chartMinutes - 1) * time.Minute)
	q := sender.HistoryQuery{Destination: dest, Tenant: tenant, Since: from}
	var delivered, dead [chartMinutes]int
	ch := &chart{Cap: chartCap, W: chartW, H: chartH, Left: chartLeft, Base: chartH - chartBottom}
	read := 0
	for cursor := ""; ; {
		page, next, err := c.svc.History(ctx, q, cursor, min(chartPage, chartCap-read))
		if err != nil {
			return nil, err
		}
		for _, m := range page {
			read++
			i := int(m.SettledAt.Sub(from) / time.Minute)
			if i < 0 || i >= chartMinutes {
				continue
			}
			switch m.State {
			case sender.StateDelivered:
				delivered[i]++
				ch.Delivered++
			case sender.StateDead:
				dead[i]++
				ch.Dead++
			}
		}
		if next == "" {
			break
		}
		if read >= chartCap {
			ch.More = true
			break
		}
		cursor = next
	}
	for i := range chartMinutes {
		ch.Max = max(ch.Max, delivered[i]+dead[i])
	}
	plotW, plotH := float64(chartW-chartLeft), float64(chartH-chartBottom)
	step := plotW / chartMinutes
	scale := 0.0
	if ch.Max > 0 {
		scale = plotH / float64(ch.Max)
	}
	for i := range chartMinutes {
		at := from.Add(time.Duration(i) * time.Minute)
		b := chartBar{Minute: at.UTC().Format("15:04"), Delivered: delivered[i], Dead: dead[i],
			X: chartLeft + float64(i)*step, W: step * chartBarFraction}
		b.DeadH = float64(dead[i]) * scale
		b.DeadY = plotH - b.DeadH
		b.DeliveredH = float64(delivered[i]) * scale
		b.DeliveredY = b.DeadY - b.DeliveredH
		ch.Bars = append(ch.Bars, b)
		if at.Minute()%15 == 0 {
			ch.Ticks = append(ch.Ticks, chartTick{X: b.X, Label: b.Minute})
		}
	}
	return ch, nil
}
