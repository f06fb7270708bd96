// Package console is the dead-letter triage page: a server-rendered web
// console over the sender's state, for the person who decides what to
// redrive. It shows the dead letters grouped by destination and error
// class, a filtered and paged list, an envelope's detail with its attempt
// log, a replay button and a bounded redrive (previewed, then confirmed),
// each followed by the live outcome of what it moved, and the queue's
// health with pause and resume. Its Deliveries page (deliveries.go)
// searches the delivery history, shows what became of an envelope after
// it left the queue, and resends it, previewed and confirmed as a
// redrive is.
//
// Reading works without JavaScript; a small script refreshes the health
// table. A console can be scoped to one destination: everything it shows
// and does is then that destination's, so the page can be handed to a
// subscriber. State changes are POSTs that carry a CSRF token (a
// double-submit cookie) and pass Go's cross-origin protection; a
// redrive's confirm form also carries a one-time token (confirm.go), so
// that posting it twice moves one batch.
//
// The package imports no Caddy: the webhook_console handler resolves the
// scope and the mount path and calls Serve.
package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/pathseg"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/portal"
	"github.com/hookgate/hookgate/sender"
)

// Service is what the console needs of the sender: the same service the
// admin API and the CLI use.
type Service interface {
	Destinations(ctx context.Context) ([]sender.DestinationStatus, error)
	Destination(ctx context.Context, name string) (sender.DestinationStatus, error)
	SetPaused(ctx context.Context, name string, paused bool, by string) (sender.DestinationStatus, error)
	Summary(ctx context.Context, f sender.Filter, upTo int) ([]sender.Group, int, bool, error)
	Count(ctx context.Context, f sender.Filter, upTo int) (int, bool, error)
	List(ctx context.Context, f sender.Filter, limit int, cursor string) ([]*sender.Meta, string, error)
	Get(ctx context.Context, dest, id string) (*sender.Envelope, sender.State, error)
	HeaderSent(e *sender.Envelope) (http.Header, error)
	Redrive(ctx context.Context, f sender.Filter, limit int, by string, dryRun bool) (*sender.Redrive, error)
	// Progress reads a redrive's record; with a scope, only one confined
	// to it (else sender.ErrNotFound).
	Progress(ctx context.Context, id string, scope sender.Scope) (*sender.Redrive, error)
	// Delivery reads dest's envelope id in any state, a delivered one
	// from the history.
	Delivery(ctx context.Context, dest, id string) (*sender.Envelope, sender.State, error)
	// History pages through the delivery history, newest first.
	History(ctx context.Context, q sender.HistoryQuery, cursor string, limit int) ([]*sender.Meta, string, error)
	// Resend sends settled envelopes again, as a redrive (Progress
	// follows it).
	Resend(ctx context.Context, q sender.HistoryQuery, limit int, by string, dryRun bool) (*sender.Redrive, error)
}

// View is who is asking and where the console is mounted, per request.
type View struct {
	// Base is the path the console is mounted at, without a trailing
	// slash ("" at the root); links and form actions start with it.
	Base string
	// Scope is what this request may see and act on: one destination, a
	// tenant's (a portal link's), or, when zero, the operator's view of
	// every destination.
	Scope sender.Scope
	// By names who acts, for the audit record of a redrive.
	By string
}

// Console serves the pages.
type Console struct {
	svc Service
	// MaxRedrive is the most one redrive may move.
	MaxRedrive int
	// PageSize is how many dead letters a list page shows.
	PageSize int
	now      func() time.Time
	pages    map[string]*template.Template
	cross    *http.CrossOriginProtection
	once     OnceStore
	mux      route.Mux // the pages, registered by route
	// confirmWait is how long a confirm post waits for another post of
	// the same form to finish its redrive.
	confirmWait time.Duration
}

// DefaultRedriveBatch is the most one redrive or resend from the page
// moves unless configured (Console.MaxRedrive): the batch an operator
// confirms at once, below the sender's own bound (sender.DefaultMaxRedrive).
const DefaultRedriveBatch = 100

// countCap bounds the count a list page makes: past it the page says
// "more than". summaryCap bounds the dead letters the overview groups.
const (
	countCap   = 10000
	summaryCap = 100000
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// New returns a console over svc that keeps its one-time confirm tokens
// in once (the store that instances serving the same console share); now
// is its clock (nil: time.Now), for the tokens too.
func New(svc Service, once OnceStore, now func() time.Time) *Console {
	if now == nil {
		now = time.Now
	}
	c := &Console{svc: svc, MaxRedrive: DefaultRedriveBatch, PageSize: 50, now: now, pages: map[string]*template.Template{},
		cross: http.NewCrossOriginProtection(), once: once, confirmWait: confirmWait}
	funcs := template.FuncMap{
		"age":    func(t time.Time) string { return age(c.now(), t) },
		"when":   func(t time.Time) string { return when(t) },
		"secs":   func(s float64) string { return age(c.now(), c.now().Add(-time.Duration(s*float64(time.Second)))) },
		"path":   pathseg.Escape,
		"status": statusText,
		"inc":    func(i int) int { return i + 1 },
		"ms":     func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) },
	}
	c.route()
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	names, _ := fs.Glob(templateFS, "templates/*.html")
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		c.pages[name] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, n))
	}
	return c
}

// page is what every template gets.
type page struct {
	View
	Title   string
	CSRF    string
	Refresh int // seconds; 0: no meta refresh
	Data    any
}

// Serve answers one request; r.URL.Path is relative to v.Base. Every
// request passes Go's cross-origin protection, and a POST's form its
// size bound and CSRF check, before it is routed.
func (c *Console) Serve(w http.ResponseWriter, r *http.Request, v View) {
	secure(w.Header(), "same-origin")
	if err := c.cross.Check(r); err != nil {
		c.fail(w, r, v, problem.CrossOriginRequest, "this console accepts changes only from its own pages")
		return
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				c.fail(w, r, v, problem.BodyTooLarge, "a console form is at most 64 KiB")
			} else {
				c.fail(w, r, v, problem.BadRequest, "the form did not parse")
			}
			return
		}
		if !c.tokenOK(r) {
			c.fail(w, r, v, problem.CSRFTokenInvalid, "the form's CSRF token is missing or wrong: reload the page and try again")
			return
		}
	}
	c.mux.ServeHTTP(w, routed(r, v))
}

// viewKey is the context key of a request's View.
type viewKey struct{}

// routed is r for the router: with v in its context, and its path
// canonical (see segments), so that ServeMux neither redirects it nor
// misses a trailing slash.
func routed(r *http.Request, v View) *http.Request {
	parts := segments(r.URL)
	for i, p := range parts {
		parts[i] = pathseg.Escape(p)
	}
	u := *r.URL
	u.RawPath = "/" + strings.Join(parts, "/")
	u.Path, _ = url.PathUnescape(u.RawPath) // escaped by pathseg: it unescapes
	r = r.WithContext(context.WithValue(r.Context(), viewKey{}, v))
	r.URL = &u
	return r
}

// route registers the console's pages on its router, as ServeMux patterns
// under the mount path (a GET takes HEAD too); a request none takes is
// 404 not_found, or 405 method_not_allowed with Allow.
func (c *Console) route() {
	page := func(pattern string, f func(http.ResponseWriter, *http.Request, View) error) {
		c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			v := r.Context().Value(viewKey{}).(View)
			if err := f(w, r, v); err != nil {
				c.failErr(w, r, v, err)
			}
		})
	}
	// arg passes the pattern's wildcard name to f.
	arg := func(name string, f func(http.ResponseWriter, *http.Request, View, string) error) func(http.ResponseWriter, *http.Request, View) error {
		return func(w http.ResponseWriter, r *http.Request, v View) error { return f(w, r, v, route.Value(r, name)) }
	}
	paused := func(pause bool) func(http.ResponseWriter, *http.Request, View, string) error {
		return func(w http.ResponseWriter, r *http.Request, v View, name string) error {
			return c.setPaused(w, r, v, name, pause)
		}
	}
	page("GET /{$}", c.overview)
	page("GET /health", c.health)
	page("GET /assets/{name}", arg("name", func(w http.ResponseWriter, r *http.Request, v View, name string) error {
		c.asset(w, r, v, name)
		return nil
	}))
	page("GET /dead", c.list)
	page("GET /dead/{id}", arg("id", c.detail))
	page("POST /dead/{id}/replay", arg("id", c.replay))
	page("POST /redrive", c.redrive)
	page("GET /deliveries", c.deliveries)
	page("GET /deliveries/{id}", arg("id", c.delivery))
	page("POST /resend", c.resend)
	page("GET /redrives/{id}", arg("id", c.progress))
	page("POST /destinations/{name}/pause", arg("name", paused(true)))
	page("POST /destinations/{name}/resume", arg("name", paused(false)))
	c.mux.NotFound = func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, r.Context().Value(viewKey{}).(View), problem.NotFound, "no such page")
	}
	c.mux.MethodNotAllowed = func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, r.Context().Value(viewKey{}).(View), problem.MethodNotAllowed, r.Method+" is not allowed here")
	}
}

// segments splits the escaped path, then unescapes each segment: a
// delivery ID may hold a slash, and "." and ".." come escaped (pathseg).
func segments(u *url.URL) []string {
	p := strings.Trim(u.EscapedPath(), "/")
	if p == "" {
		return []string{}
	}
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if v, err := pathseg.Unescape(s); err == nil {
			parts[i] = v
		}
	}
	return parts
}

// consoleError is a refusal with its reason.
type consoleError struct {
	reason problem.Reason
	detail string
}

func (e consoleError) Error() string { return e.detail }

func refuse(reason problem.Reason, format string, args ...any) error {
	return consoleError{reason: reason, detail: fmt.Sprintf(format, args...)}
}

func (c *Console) failErr(w http.ResponseWriter, r *http.Request, v View, err error) {
	var ce consoleError
	switch {
	case errors.As(err, &ce):
		c.fail(w, r, v, ce.reason, ce.detail)
	case errors.Is(err, sender.ErrBadFilter):
		c.fail(w, r, v, problem.BadRequest, err.Error())
	case errors.Is(err, sender.ErrBadLimit):
		// The sender's own bound (its max_redrive).
		c.fail(w, r, v, problem.BadLimit, err.Error())
	case errors.Is(err, sender.ErrOrphaned):
		c.fail(w, r, v, problem.DestinationOrphaned, err.Error())
	case errors.Is(err, sender.ErrNotFound):
		c.fail(w, r, v, problem.NotFound, "no such dead letter")
	case errors.Is(err, sender.ErrUnknownDestination):
		c.fail(w, r, v, problem.UnknownDestination, "no such destination")
	case errors.Is(err, context.Canceled):
		// The client left; nobody reads the answer.
	default:
		w.Header().Set("Retry-After", "1")
		c.fail(w, r, v, problem.StoreUnavailable, "the queue's store did not answer: try again shortly")
	}
}

// Refuse answers a portal request that Open refused (err nil: Open
// answered it): 403 with the reason, or 503 when the store failed.
func (c *Console) Refuse(w http.ResponseWriter, r *http.Request, v View, err error) {
	if err != nil {
		secure(w.Header(), "no-referrer") // its URL may hold the refused link's token
	}
	switch {
	case err == nil:
	case errors.Is(err, portal.ErrNoSession):
		c.fail(w, r, v, problem.PortalSessionMissing, err.Error())
	case errors.Is(err, portal.ErrInvalid):
		c.fail(w, r, v, problem.PortalLinkInvalid, err.Error())
	case errors.Is(err, portal.ErrExpired):
		c.fail(w, r, v, problem.PortalLinkExpired, err.Error())
	case errors.Is(err, portal.ErrRevoked):
		c.fail(w, r, v, problem.PortalLinkRevoked, err.Error())
	default:
		c.failErr(w, r, v, err)
	}
}

// secure sets the headers every page carries: its content security
// policy, no sniffing, no caching, and the referrer policy given.
func secure(h http.Header, referrer string) {
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", referrer)
	h.Set("Cache-Control", "no-store")
}

// fail answers a refusal: an HTML page for a browser, problem+json for
// anything else. detail must hold no secret.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v View, reason problem.Reason, detail string) {
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		problem.Write(w, reason, detail, 0)
		return
	}
	c.render(w, r, v, reason.Status, "error", "Error", map[string]any{"Status": reason.Status, "StatusText": http.StatusText(reason.Status), "Reason": reason.Code, "Detail": detail})
}

// render executes a page into a buffer, so a template error never sends
// half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, v View, status int, name, title string, data any) {
	c.renderRefresh(w, r, v, status, name, title, 0, data)
}

// renderRefresh is render with a meta refresh every refresh seconds.
func (c *Console) renderRefresh(w http.ResponseWriter, r *http.Request, v View, status int, name, title string, refresh int, data any) {
	var buf bytes.Buffer
	p := page{View: v, Title: title, CSRF: c.token(w, r, v), Refresh: refresh, Data: data}
	if err := c.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		problem.Write(w, problem.RenderFailed, "the page could not be rendered", 0)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes()) // a browser gone away has nothing to be told
	}
}

func (c *Console) asset(w http.ResponseWriter, r *http.Request, v View, name string) {
	b, err := assetFS.ReadFile("assets/" + name)
	if err != nil {
		c.fail(w, r, v, problem.NotFound, "no such asset")
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(b) //nolint:gosec // G705: b is an embedded asset, not request data; a browser gone away has nothing to be told
}

// filterOf reads a dead-letter filter from a form or a query: in a scoped
// view the destination is always the scope's.
func filterOf(v View, q url.Values) (sender.Filter, error) {
	f := v.confine(sender.Filter{Destination: q.Get("destination"), Class: q.Get("class")})
	for _, k := range []string{"since", "until"} {
		s := q.Get(k)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return f, refuse(problem.BadRequest, "%s: want an RFC 3339 time, got %q", k, s)
		}
		if k == "since" {
			f.Since = t
		} else {
			f.Until = t
		}
	}
	return f, nil
}

// filterQuery is f as a query string, for links (encoded here, so the
// template takes it as is).
func filterQuery(f sender.Filter) template.URL {
	q := url.Values{}
	for k, v := range map[string]string{"destination": f.Destination, "class": f.Class} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.Format(time.RFC3339))
	}
	return template.URL(q.Encode())
}

// destinations is the queue health of what v may see.
func (c *Console) destinations(ctx context.Context, v View) ([]sender.DestinationStatus, error) {
	if v.Scope.Destination != "" {
		d, err := c.svc.Destination(ctx, v.Scope.Destination)
		return []sender.DestinationStatus{d}, err
	}
	all, err := c.svc.Destinations(ctx)
	if err != nil || v.Scope.IsZero() {
		return all, err
	}
	var seen []sender.DestinationStatus
	for _, d := range all {
		if v.Scope.Sees(d.Name) {
			seen = append(seen, d)
		}
	}
	return seen, nil
}

// health is the queue health table alone: what the overview's script
// refreshes, without the dead-letter scan of the overview.
func (c *Console) health(w http.ResponseWriter, r *http.Request, v View) error {
	dests, err := c.destinations(r.Context(), v)
	if err != nil {
		return err
	}
	c.render(w, r, v, http.StatusOK, "health", "Queue health", map[string]any{"Destinations": dests})
	return nil
}

// overview is the front page: queue health and the dead letters grouped.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, v View) error {
	dests, err := c.destinations(r.Context(), v)
	if err != nil {
		return err
	}
	groups, total, more, err := c.svc.Summary(r.Context(), v.confine(sender.Filter{}), summaryCap)
	if err != nil {
		return err
	}
	type groupRow struct {
		sender.Group
		Query template.URL
	}
	rows := make([]groupRow, 0, len(groups))
	for _, g := range groups {
		rows = append(rows, groupRow{g, filterQuery(sender.Filter{Destination: g.Destination, Class: g.Class})})
	}
	c.render(w, r, v, http.StatusOK, "overview", "Dead letters", map[string]any{
		"Destinations": dests, "Groups": rows, "Total": total, "More": more, "Cap": summaryCap,
	})
	return nil
}

// list is a filtered page of dead letters, with the bounded redrive form.
func (c *Console) list(w http.ResponseWriter, r *http.Request, v View) error {
	q := r.URL.Query()
	f, err := filterOf(v, q)
	if err != nil {
		return err
	}
	entries, next, err := c.svc.List(r.Context(), f, c.PageSize, q.Get("cursor"))
	if err != nil {
		return err
	}
	matched, more, err := c.svc.Count(r.Context(), f, countCap)
	if err != nil {
		return err
	}
	var dests []string
	orphaned := false
	if v.Scope.Destination == "" {
		ds, err := c.destinations(r.Context(), v)
		if err != nil {
			return err
		}
		// The dead letters of a destination no longer configured (an
		// orphan) are listed, but cannot be redriven: no form for them.
		for _, d := range ds {
			dests = append(dests, d.Name)
			orphaned = orphaned || d.Name == f.Destination && d.State == sender.StateOrphaned
		}
	}
	var nextQuery template.URL
	if next != "" {
		nq := url.Values{}
		for k, vs := range q {
			nq[k] = vs
		}
		nq.Set("cursor", next)
		nextQuery = template.URL(nq.Encode())
	}
	c.render(w, r, v, http.StatusOK, "list", "Dead letters", map[string]any{
		"Filter": f, "Since": q.Get("since"), "Until": q.Get("until"),
		"Entries": entries, "Matched": matched, "More": more, "Next": nextQuery, "Destinations": dests, "Classes": sender.Classes(),
		"Limit": min(10, c.MaxRedrive), "MaxRedrive": c.MaxRedrive, "Orphaned": orphaned,
	})
	return nil
}

// header is one header line of an envelope's request.
type header struct{ Name, Value string }

// detail is one envelope: payload, the header it is sent with, its
// attempt log, and what durable ingress kept of its request.
func (c *Console) detail(w http.ResponseWriter, r *http.Request, v View, id string) error {
	dest, err := v.destination(r.URL.Query().Get("destination"))
	if err != nil {
		return err
	}
	e, state, err := c.svc.Get(r.Context(), dest, id)
	if err != nil {
		return err
	}
	// An envelope of a destination no longer configured (an orphan) has
	// no header to show, and cannot be replayed: its page says so.
	h, err := c.svc.HeaderSent(e)
	orphaned := errors.Is(err, sender.ErrUnknownDestination)
	if err != nil && !orphaned {
		return err
	}
	var headers []header
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, val := range h[k] {
			headers = append(headers, header{k, val})
		}
	}
	payload, note := showPayload(e.Payload)
	c.render(w, r, v, http.StatusOK, "detail", "Delivery "+e.ID, map[string]any{
		"E": e, "State": string(state), "Dead": state == sender.StateDead, "Headers": headers,
		"Payload": payload, "PayloadNote": note, "Orphaned": orphaned, "Received": receivedOf(e.Received),
	})
	return nil
}

// maxShown bounds the payload a detail page shows.
const maxShown = 64 << 10

// showPayload is a payload as text for a person: JSON indented, other
// UTF-8 as is, anything else as a note; long ones cut.
func showPayload(p []byte) (string, string) {
	note := fmt.Sprintf("%d bytes", len(p))
	if json.Valid(p) {
		var buf bytes.Buffer
		if json.Indent(&buf, p, "", "  ") == nil {
			p = buf.Bytes()
			note += ", JSON (indented here; delivered byte for byte as enqueued)"
		}
	}
	if !utf8.Valid(p) {
		return "", note + ", not UTF-8 text: not shown"
	}
	if len(p) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		return string(p[:cut]), note + fmt.Sprintf(", the first %d KiB shown", maxShown>>10)
	}
	return string(p), note
}

// replay redrives one dead letter and shows its live outcome.
func (c *Console) replay(w http.ResponseWriter, r *http.Request, v View, id string) error {
	dest, err := v.destination(r.PostFormValue("destination"))
	if err != nil {
		return err
	}
	if dest == "" {
		return refuse(problem.BadRequest, "a replay names the envelope's destination")
	}
	// Detached: a replay runs to its end when the client leaves.
	rd, err := c.svc.Redrive(context.WithoutCancel(r.Context()), sender.Filter{Destination: dest, IDs: []string{id}}, 1, v.By, false)
	if err != nil {
		return incomplete(rd, err)
	}
	if rd.Moved == 0 {
		return refuse(problem.NotFound, "no such dead letter: it may have been replayed or purged already")
	}
	http.Redirect(w, r, v.Base+"/redrives/"+url.PathEscape(rd.ID), http.StatusSeeOther)
	return nil
}

// redrive is the bounded redrive of a filter: without confirm=yes it
// previews (a dry run: how many match, how many would move) and issues
// the confirm form's one-time token; with it, confirm moves them.
func (c *Console) redrive(w http.ResponseWriter, r *http.Request, v View) error {
	f, err := filterOf(v, r.PostForm) // Serve parsed the form
	if err != nil {
		return err
	}
	limit, err := c.limitOf(r)
	if err != nil {
		return err
	}
	// Serve checked that the form's CSRF token is the cookie's.
	fp := confirmBinding(v, f, limit, r.PostForm.Get("csrf"))
	return c.twoStep(w, r, v, batch{fp: fp, noun: "dead letter"}, limit, func(ctx context.Context, dryRun bool) (*sender.Redrive, error) {
		return c.svc.Redrive(ctx, f, limit, v.By, dryRun)
	}, func(rd *sender.Redrive, moves int, once string) {
		c.render(w, r, v, http.StatusOK, "confirm", "Confirm the redrive", map[string]any{
			"Filter": f, "Since": r.PostForm.Get("since"), "Until": r.PostForm.Get("until"),
			"Limit": limit, "Matched": rd.Matched, "Moves": moves, "Query": filterQuery(f),
			"Once": once, "Lapse": int(ConfirmTTL.Minutes()),
		})
	})
}

// limitOf reads a redrive's or a resend's limit from the form: 1 to
// MaxRedrive.
func (c *Console) limitOf(r *http.Request) (int, error) {
	limit, err := strconv.Atoi(r.PostForm.Get("limit"))
	if err != nil || limit < 1 || limit > c.MaxRedrive {
		return 0, refuse(problem.BadLimit, "limit: want a whole number from 1 to %d", c.MaxRedrive)
	}
	return limit, nil
}

// twoStep is the preview-then-confirm of a bounded move (a redrive, a
// resend): with confirm=yes, b moves what run moves (confirm spends the
// form's one-time token); without, run counts what matches (a dry run),
// the token is issued when something would move, and show renders the
// preview.
func (c *Console) twoStep(w http.ResponseWriter, r *http.Request, v View, b batch, limit int,
	run func(ctx context.Context, dryRun bool) (*sender.Redrive, error), show func(rd *sender.Redrive, moves int, once string)) error {
	if r.PostForm.Get("confirm") == "yes" {
		b.move = func(ctx context.Context) (*sender.Redrive, error) { return run(ctx, false) }
		return c.confirm(w, r, v, b)
	}
	rd, err := run(r.Context(), true)
	if err != nil {
		return err
	}
	moves, once := min(rd.Matched, limit), ""
	if moves > 0 {
		if once, err = c.issue(r.Context(), b.fp); err != nil {
			return err
		}
	}
	show(rd, moves, once)
	return nil
}

// batch is what a confirm form moves: a redrive of dead letters, or a
// resend of what the history keeps.
type batch struct {
	// fp binds the form's one-time token to what it moves.
	fp dedupe.Fingerprint
	// noun names one of what it moves, for a person.
	noun string
	// move moves the batch (not a dry run).
	move func(ctx context.Context) (*sender.Redrive, error)
}

// confirm moves the batch a confirm form names, once: the first post of
// the form takes its token and redrives; any other post of it is shown
// that redrive's outcome, after waiting for it while it runs.
func (c *Console) confirm(w http.ResponseWriter, r *http.Request, v View, b batch) error {
	token := r.PostForm.Get("once")
	if token == "" {
		return refuse(problem.ConfirmTokenMissing,
			"this confirm form carries no one-time token (a page from an older console?): nothing moved; preview the redrive again")
	}
	// Detached from the client: a double click cancels the first post,
	// and a token once taken must be used or given back, and its
	// redrive run to its end.
	ctx := context.WithoutCancel(r.Context())
	var timeout <-chan time.Time
	for {
		claim, res, err := c.take(ctx, token, b.fp)
		if err != nil {
			return err
		}
		switch res.Status {
		case dedupe.TookOver:
			return c.confirmed(ctx, w, r, v, b, token, claim)
		case dedupe.Recorded:
			id := string(res.Record.Body)
			if id == "" {
				return refuse(problem.NotFound, "this form was posted already, and no %s matched then: nothing moved", b.noun)
			}
			http.Redirect(w, r, v.Base+"/redrives/"+url.PathEscape(id)+"?resubmitted=1", http.StatusSeeOther)
			return nil
		case dedupe.Mismatch:
			return refuse(problem.ConfirmTokenMismatch,
				"this confirmation was issued for another filter or limit, or to another browser: nothing moved; preview the redrive again")
		case dedupe.InFlight:
			if timeout == nil {
				t := time.NewTimer(c.confirmWait)
				defer t.Stop()
				timeout = t.C
			}
			select {
			case <-r.Context().Done():
				return r.Context().Err()
			case <-timeout:
				w.Header().Set("Retry-After", "5")
				return refuse(problem.RedriveInProgress,
					"this form was posted already and its redrive is still moving dead letters: reload in a moment to see its outcome (nothing more moves)")
			case <-time.After(confirmPoll):
			}
		default: // Claimed: no such token
			return refuse(problem.ConfirmTokenStale,
				"this confirmation is unknown or has expired (a preview is good for %d minutes): nothing moved; preview the redrive again", int(ConfirmTTL.Minutes()))
		}
	}
}

// confirmed redrives under a token just taken, then records the
// redrive on the token, or gives the token back when nothing moved.
func (c *Console) confirmed(ctx context.Context, w http.ResponseWriter, r *http.Request, v View, b batch, token, claim string) error {
	rd, err := b.move(ctx)
	// A failure to note the token's fate leaves it taken until it
	// expires: later posts of the form then move nothing, which is safe,
	// so used's and giveBack's errors are dropped.
	if err != nil {
		if rd != nil && rd.ID != "" && rd.Moved > 0 {
			_ = c.used(ctx, token, claim, rd.ID)
		} else {
			_ = c.giveBack(ctx, token, claim, b.fp)
		}
		return incomplete(rd, err)
	}
	_ = c.used(ctx, token, claim, rd.ID) // see above: a token left taken is safe
	if rd.ID == "" {
		return refuse(problem.NotFound, "no %s matches any more: nothing moved", b.noun)
	}
	http.Redirect(w, r, v.Base+"/redrives/"+url.PathEscape(rd.ID), http.StatusSeeOther)
	return nil
}

// incomplete is the error of a redrive that failed: one that moved some
// envelopes before the store failed says so, with its ID, so nobody
// retries it blindly past its limit.
func incomplete(rd *sender.Redrive, err error) error {
	if rd != nil && rd.ID != "" && rd.Moved > 0 {
		return refuse(problem.RedriveIncomplete,
			"redrive %s moved %d envelopes, then the store failed: open its outcome page before redriving again", rd.ID, rd.Moved)
	}
	return err
}

// progress shows a redrive's audit record and what became of what it
// moved; the page refreshes itself while any is pending.
func (c *Console) progress(w http.ResponseWriter, r *http.Request, v View, id string) error {
	rd, err := c.svc.Progress(r.Context(), id, v.Scope)
	if errors.Is(err, sender.ErrNotFound) {
		return refuse(problem.NotFound, "no such redrive")
	}
	if err != nil {
		return err
	}
	refresh := 0
	if rd.Pending > 0 {
		refresh = 2
	}
	shown := rd.Letters[:min(len(rd.Letters), c.PageSize)]
	title := "Redrive "
	if rd.Kind == "resend" {
		title = "Resend "
	}
	c.renderRefresh(w, r, v, http.StatusOK, "redrive", title+rd.ID, refresh, map[string]any{
		"R": rd, "Letters": shown, "More": len(rd.Letters) - len(shown),
		"Resubmitted": r.URL.Query().Get("resubmitted") != ""})
	return nil
}

// setPaused pauses or resumes a destination, then goes back to the front
// page.
func (c *Console) setPaused(w http.ResponseWriter, r *http.Request, v View, name string, paused bool) error {
	if !v.Scope.Sees(name) {
		return refuse(problem.UnknownDestination, "no such destination")
	}
	by := v.By
	if !v.Scope.IsZero() {
		// A subscriber's pause is its own: it resumes that one alone, never
		// one an operator or a 410 made.
		by = sender.SubscriberPause(name) + " " + v.By
	}
	if _, err := c.svc.SetPaused(r.Context(), name, paused, by); errors.Is(err, sender.ErrPausedByOther) {
		return refuse(problem.ResumeNotAllowed, "this destination was paused by its operator: ask the operator to resume it")
	} else if err != nil {
		return err
	}
	http.Redirect(w, r, v.Base+"/", http.StatusSeeOther)
	return nil
}

// age is how long before now t was, to the second, for a person.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	d := max(now.Sub(t), 0)
	switch s := int(d.Seconds()); {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 48*3600:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	default:
		return fmt.Sprintf("%dd", s/86400)
	}
}

func when(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func statusText(s int) string {
	if s == 0 {
		return "no response"
	}
	return strconv.Itoa(s)
}
