package console

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

func (f *fakeService) History(ctx context.Context, q sender.HistoryQuery, cursor string, limit int) ([]*sender.Meta, string, error) {
	f.note(q.Destination)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.historyCalls++
	if q.State != "" && q.State != sender.StateDelivered && q.State != sender.StateDead {
		return nil, "", fmt.Errorf("%w: state %q", sender.ErrBadFilter, q.State)
	}
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil {
			return nil, "", fmt.Errorf("%w: the cursor is not one History gave", sender.ErrBadFilter)
		}
		start = n
	}
	hf := sender.HistoryFilter{ID: q.ID, Entity: q.Entity, State: q.State, Since: q.Since, Until: q.Until}
	var out []*sender.Meta
	for i := start; i < len(f.history); i++ {
		m := f.history[i]
		if (q.Destination == "" || m.Destination == q.Destination) && hf.Match(m) {
			if len(out) == limit {
				return out, strconv.Itoa(i), nil
			}
			out = append(out, m)
		}
	}
	return out, "", nil
}

func (f *fakeService) Resend(ctx context.Context, q sender.HistoryQuery, limit int, by string, dryRun bool) (*sender.Redrive, error) {
	f.note(q.Destination)
	page, _, err := f.History(ctx, q, "", len(f.history)+1)
	if err != nil {
		return nil, err
	}
	r := &sender.Redrive{Kind: "resend", Resend: &q, Filter: sender.Filter{Destination: q.Destination}, Limit: limit, Matched: len(page), By: by}
	if dryRun {
		return r, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moves++
	f.resent = append(f.resent, q)
	r.ID, r.Moved = fmt.Sprintf("rd_%d", f.moves), min(len(page), limit)
	return r, nil
}

func (f *fakeService) Delivery(ctx context.Context, dest, id string) (*sender.Envelope, sender.State, error) {
	if dest == "" {
		return nil, "", fmt.Errorf("%w: a delivery is read by destination and ID", sender.ErrBadFilter)
	}
	return f.Get(ctx, dest, id)
}

// resends is how many resends were not dry runs.
func (f *fakeService) resends() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.resent)
}

// chartNow is the clock of the history tests.
var chartNow = time.Date(2026, 12, 1, 15, 30, 20, 0, time.UTC)

// withHistory is f with a history, newest first: in each of a and b,
// five delivered (entity r-0 and r-1 alternating) and one dead, settled a
// minute apart, and a delivered one whose payload expired.
func withHistory(f *fakeService) *fakeService {
	for i := range 6 {
		for _, d := range []string{"a", "b"} {
			m := &sender.Meta{ID: fmt.Sprintf("%s-%d", d, i), Destination: d, EventType: "seat.released", Entity: fmt.Sprintf("r-%d", i%2),
				State: sender.StateDelivered, SettledAt: chartNow.Add(-time.Duration(i) * time.Minute), Tried: 1, LastStatus: 200}
			if i == 5 {
				m.State, m.LastStatus, m.Entity = sender.StateDead, 400, "<b>bold</b>"
			}
			f.history = append(f.history, m)
		}
	}
	return f
}

// historyConsole is a console over a fake with a history, on chartNow.
func historyConsole(t *testing.T) (*Console, *fakeService) {
	f := withHistory(newFake())
	f.dead["a/a-0"] = &sender.Envelope{ID: "a-0", Destination: "a", Entity: "r-0", Payload: []byte(`{"seat":"<script>x</script>"}`),
		Log: []sender.Attempt{{At: chartNow, Status: 200, Latency: 12 * time.Millisecond}}}
	f.dead["a/a-2"] = &sender.Envelope{ID: "a-2", Destination: "a", PayloadExpired: true,
		Log: []sender.Attempt{{At: chartNow.Add(-2 * time.Minute), Status: 200}}}
	return New(f, onceStore(t, t.TempDir()), func() time.Time { return chartNow }), f
}

var rowIDs = regexp.MustCompile(`<tr data-id="([^"]+)"`)

// ids are the delivery IDs a list page shows, in order.
func ids(body string) []string {
	var out []string
	for _, m := range rowIDs.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestDeliveriesSearch(t *testing.T) {
	c, _ := historyConsole(t)
	for _, tt := range []struct {
		query string
		want  string
	}{
		{"", "[a-0 b-0 a-1 b-1 a-2 b-2 a-3 b-3 a-4 b-4 a-5 b-5]"},
		{"?id=b-3", "[b-3]"},
		{"?entity=r-1&destination=a", "[a-1 a-3]"},
		{"?state=dead", "[a-5 b-5]"},
		{"?id=nope", "[]"},
	} {
		w := request(c, View{}, "GET", "/deliveries"+tt.query, nil)
		if got := fmt.Sprint(ids(w.Body.String())); w.Code != 200 || got != tt.want {
			t.Errorf("GET /deliveries%s: %d %s, want %s", tt.query, w.Code, got, tt.want)
		}
	}
	body := request(c, View{}, "GET", "/deliveries?state=dead", nil).Body.String()
	if strings.Contains(body, "<b>bold") || !strings.Contains(body, "&lt;b&gt;bold") {
		t.Errorf("an entity's markup is not escaped:\n%s", body)
	}
	if !strings.Contains(request(c, View{}, "GET", "/", nil).Body.String(), `href="/deliveries"`) {
		t.Error("no link to the Deliveries page")
	}
}

// TestDeliveriesPaged: pages follow the service's cursor, keep the
// search, and list each entry once.
func TestDeliveriesPaged(t *testing.T) {
	c, _ := historyConsole(t)
	c.PageSize = 5
	var got []string
	target := "/deliveries?destination=a"
	next := regexp.MustCompile(`id="next" href="([^"]+)"`)
	for range 10 {
		body := request(c, View{Base: "/c"}, "GET", strings.TrimPrefix(target, "/c"), nil).Body.String()
		got = append(got, ids(body)...)
		m := next.FindStringSubmatch(body)
		if m == nil {
			break
		}
		target = strings.ReplaceAll(m[1], "&amp;", "&")
		if !strings.Contains(target, "destination=a") {
			t.Fatalf("the next page's link drops the search: %s", target)
		}
	}
	if fmt.Sprint(got) != "[a-0 a-1 a-2 a-3 a-4 a-5]" {
		t.Fatalf("paged: %v", got)
	}
	if w := request(c, View{}, "GET", "/deliveries?cursor=zz", nil); w.Code != 400 {
		t.Errorf("a cursor History never gave: %d", w.Code)
	}
}

func TestDeliveryDetail(t *testing.T) {
	c, _ := historyConsole(t)
	w := request(c, View{Base: "/c"}, "GET", "/deliveries/a-0?destination=a", nil)
	body := w.Body.String()
	for _, want := range []string{`id="state" class="state dead"`, `id="attempts"`, "12.0", `id="payload"`, "&lt;script&gt;", `action="/c/resend"`, `name="id" value="a-0"`} {
		if w.Code != 200 || !strings.Contains(body, want) {
			t.Errorf("detail: %d, no %s:\n%s", w.Code, want, body)
		}
	}
	// A payload the history no longer keeps: said so, and no resend.
	w = request(c, View{}, "GET", "/deliveries/a-2?destination=a", nil)
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, `id="payload-expired"`) || strings.Contains(body, `id="resend"`) {
		t.Errorf("an expired payload's detail: %d\n%s", w.Code, body)
	}
	w = request(c, View{}, "GET", "/deliveries/missing?destination=a", nil)
	if w.Code != 404 || !strings.Contains(w.Body.String(), "not_found") {
		t.Errorf("a missing delivery: %d", w.Code)
	}
	if w := request(c, View{}, "GET", "/deliveries/a-0", nil); w.Code != 400 || !strings.Contains(w.Body.String(), "bad_request") {
		t.Errorf("a delivery without its destination: %d", w.Code)
	}
}

// TestResendIsPreviewedThenConfirmed: the detail's button previews; the
// confirm form resends once, however often it is posted, and lands on
// the redrive's outcome page.
func TestResendIsPreviewedThenConfirmed(t *testing.T) {
	c, f := historyConsole(t)
	v := View{Base: "/c"}
	form := url.Values{"destination": {"a"}, "id": {"a-1"}, "limit": {"1"}}
	w := request(c, v, "POST", "/resend", maps.Clone(form))
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `id="matched">1<`) || !strings.Contains(body, `id="moves">1<`) || f.resends() != 0 {
		t.Fatalf("preview: %d, %d resends\n%s", w.Code, f.resends(), body)
	}
	m := onceField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no one-time token in the preview:\n%s", body)
	}
	form.Set("once", m[1])
	form.Set("confirm", "yes")
	w = request(c, v, "POST", "/resend", maps.Clone(form))
	if w.Code != 303 || w.Header().Get("Location") != "/c/redrives/rd_1" {
		t.Fatalf("confirmed: %d %q\n%s", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	w = request(c, v, "POST", "/resend", maps.Clone(form))
	if w.Code != 303 || w.Header().Get("Location") != "/c/redrives/rd_1?resubmitted=1" || f.resends() != 1 {
		t.Fatalf("the same form again: %d %q, %d resends", w.Code, w.Header().Get("Location"), f.resends())
	}
	if got := f.resent[0]; got.Destination != "a" || got.ID != "a-1" {
		t.Errorf("resent %+v", got)
	}
	// The token is bound to what it confirms: another ID moves nothing.
	form.Set("id", "a-3")
	if w := request(c, v, "POST", "/resend", form); w.Code != 409 || !strings.Contains(w.Body.String(), "confirm_token_mismatch") || f.resends() != 1 {
		t.Errorf("the token with another ID: %d, %d resends", w.Code, f.resends())
	}
	// A resend's outcome page says it is one.
	f.progress = &sender.Redrive{ID: "rd_1", Kind: "resend", Resend: &sender.HistoryQuery{Destination: "b", ID: "b-1"}, Filter: sender.Filter{Destination: "b"}, Limit: 1,
		Letters: []sender.Letter{{Destination: "b", ID: "b-1", Outcome: "pending"}}}
	body = request(c, v, "GET", "/redrives/rd_1", nil).Body.String()
	if !strings.Contains(body, `<h1>Resend <code id="redrive-id">`) || !strings.Contains(body, `id="resent">destination b, ID b-1`) || !strings.Contains(body, `href="/c/deliveries/b-1?destination=b"`) {
		t.Errorf("a resend's outcome page:\n%s", body)
	}
}

func TestResendRefusals(t *testing.T) {
	c, f := historyConsole(t)
	for _, tt := range []struct {
		method, target string
		form           url.Values
		status         int
		reason         string
	}{
		{"GET", "/resend", nil, 405, "method_not_allowed"},
		{"POST", "/deliveries", nil, 405, "method_not_allowed"},
		{"POST", "/deliveries/a-1", nil, 405, "method_not_allowed"},
		{"GET", "/deliveries?state=queued", nil, 400, "bad_request"},
		{"POST", "/resend", url.Values{"destination": {"a"}, "limit": {"1"}}, 400, "bad_request"},
		{"POST", "/resend", url.Values{"id": {"a-1"}, "limit": {"0"}}, 400, "bad_limit"},
		{"POST", "/resend", url.Values{"id": {"a-1"}, "limit": {"101"}}, 400, "bad_limit"},
		{"POST", "/resend", url.Values{"id": {"a-1"}, "limit": {"1"}, "csrf": {""}}, 403, "csrf_token_invalid"},
		{"POST", "/resend", url.Values{"id": {"a-1"}, "limit": {"1"}, "confirm": {"yes"}}, 400, "confirm_token_missing"},
		{"POST", "/resend", url.Values{"id": {"a-1"}, "limit": {"1"}, "confirm": {"yes"}, "once": {"NOSUCHTOKEN"}}, 409, "confirm_token_stale"},
	} {
		w := request(c, View{}, tt.method, tt.target, tt.form)
		if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.reason) {
			t.Errorf("%s %s %v: %d, want %d %s:\n%s", tt.method, tt.target, tt.form, w.Code, tt.status, tt.reason, w.Body.String())
		}
	}
	if f.resends() != 0 {
		t.Errorf("refused requests made %d resends", f.resends())
	}
}

// TestDeliveriesScoped: a scoped console's history, detail and resend
// are its destination's, whatever the request names.
func TestDeliveriesScoped(t *testing.T) {
	c, f := historyConsole(t)
	v := View{Scope: sender.Scope{Destination: "a"}}
	body := request(c, v, "GET", "/deliveries?destination=b", nil).Body.String()
	if got := fmt.Sprint(ids(body)); got != "[a-0 a-1 a-2 a-3 a-4 a-5]" || strings.Contains(body, `<option value="b"`) {
		t.Errorf("a's history: %s", got)
	}
	if w := request(c, v, "GET", "/deliveries/a-0?destination=b", nil); w.Code != 200 || !strings.Contains(w.Body.String(), `id="destination">a<`) {
		t.Errorf("a's detail asked for b: %d", w.Code)
	}
	form := url.Values{"destination": {"b"}, "id": {"b-1"}, "limit": {"1"}}
	if w := request(c, v, "POST", "/resend", maps.Clone(form)); w.Code != 200 || !strings.Contains(w.Body.String(), `id="matched">0<`) {
		t.Errorf("a previewing b's resend: %d\n%s", w.Code, w.Body.String())
	}
	form.Set("id", "a-1")
	m := onceField.FindStringSubmatch(request(c, v, "POST", "/resend", maps.Clone(form)).Body.String())
	if m == nil {
		t.Fatal("no token")
	}
	form.Set("once", m[1])
	form.Set("confirm", "yes")
	if w := request(c, v, "POST", "/resend", form); w.Code != 303 || f.resent[0].Destination != "a" {
		t.Errorf("a's resend: %d %+v", w.Code, f.resent)
	}
	for _, d := range f.asked {
		if d != "a" {
			t.Fatalf("a console scoped to a asked the service about %q (all: %q)", d, f.asked)
		}
	}
}

// TestChart: the last hour's outcomes per minute, and a bound on what
// it reads, said under the chart when hit.
func TestChart(t *testing.T) {
	c, f := historyConsole(t)
	body := request(c, View{}, "GET", "/deliveries", nil).Body.String()
	for _, want := range []string{`id="chart-delivered">10<`, `id="chart-dead">2<`, "<title>15:30: 2 delivered, 0 dead</title>", "<title>15:25: 0 delivered, 2 dead</title>", "<title>14:31: 0 delivered, 0 dead</title>", ">15:00</text>"} {
		if !strings.Contains(body, want) {
			t.Errorf("chart: no %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, `id="chart-partial"`) {
		t.Error("a chart of 12 says it is partial")
	}
	// Past the bound: the newest chartCap, said so; no more read.
	f.history = nil
	for i := range chartCap + 700 {
		f.history = append(f.history, &sender.Meta{ID: strconv.Itoa(i), Destination: "a", State: sender.StateDelivered,
			SettledAt: chartNow.Add(-time.Duration(i) * 500 * time.Millisecond)})
	}
	f.historyCalls = 0
	c.PageSize = 1
	body = request(c, View{}, "GET", "/deliveries", nil).Body.String()
	if !strings.Contains(body, `id="chart-partial"`) || !strings.Contains(body, "More than 5000") || !strings.Contains(body, `id="chart-delivered">5000<`) {
		t.Errorf("a chart past its bound:\n%s", body)
	}
	if want := 1 + chartCap/chartPage; f.historyCalls != want {
		t.Errorf("the page made %d History calls, want %d", f.historyCalls, want)
	}
	// A later page has no chart.
	if body := request(c, View{}, "GET", "/deliveries?cursor=1", nil).Body.String(); strings.Contains(body, `id="chart"`) {
		t.Error("a later page draws the chart")
	}
}

// shortService answers the first page of every history search with none
// and a cursor, as the service does when its bounded scan found nothing
// yet, and counts a resend's match as a lower bound.
type shortService struct{ *fakeService }

func (s shortService) History(ctx context.Context, q sender.HistoryQuery, cursor string, limit int) ([]*sender.Meta, string, error) {
	if cursor == "" && q.Since.IsZero() { // the chart's reads are not short
		return nil, "0", nil
	}
	return s.fakeService.History(ctx, q, cursor, limit)
}

func (s shortService) Resend(ctx context.Context, q sender.HistoryQuery, limit int, by string, dryRun bool) (*sender.Redrive, error) {
	r, err := s.fakeService.Resend(ctx, q, limit, by, dryRun)
	if r != nil {
		r.More = true
	}
	return r, err
}

// TestDeliveriesShortPageLinksOlder: a page the service answered with
// none but a cursor says older entries may match and links to them; it
// never says "No deliveries match" (issue 29).
func TestDeliveriesShortPageLinksOlder(t *testing.T) {
	_, f := historyConsole(t)
	c := New(shortService{f}, onceStore(t, t.TempDir()), func() time.Time { return chartNow })
	body := request(c, View{Base: "/c"}, "GET", "/deliveries?entity=r-1&destination=a", nil).Body.String()
	if strings.Contains(body, "No deliveries match") || !strings.Contains(body, `id="none-yet"`) ||
		!strings.Contains(body, `id="next" href="/c/deliveries?cursor=0&amp;destination=a&amp;entity=r-1"`) {
		t.Fatalf("a short first page:\n%s", body)
	}
	if got := ids(request(c, View{Base: "/c"}, "GET", "/deliveries?cursor=0&destination=a&entity=r-1", nil).Body.String()); fmt.Sprint(got) != "[a-1 a-3]" {
		t.Errorf("the older page = %v, want [a-1 a-3]", got)
	}
	// A resend's preview says when its count is a lower bound.
	w := request(c, View{}, "POST", "/resend", url.Values{"destination": {"a"}, "entity": {"r-1"}, "limit": {"1"}})
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, `At least <b class="count" id="matched">`) {
		t.Errorf("a preview whose count is a lower bound: %d\n%s", w.Code, body)
	}
}
