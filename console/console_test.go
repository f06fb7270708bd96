package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/portal"
	"github.com/hookgate/hookgate/sender"
)

// fakeService is the sender's state in memory, for the page logic: it
// records every destination the console asked about.
type fakeService struct {
	mu      sync.Mutex
	dead    map[string]*sender.Envelope // by destination/ID
	asked   []string                    // destinations named in calls
	redrive []sender.Filter
	moves   int // redrives that were not dry runs
	// onRedrive, when set, answers the redrives that are not dry runs;
	// n counts them from 1.
	onRedrive func(ctx context.Context, n int) (*sender.Redrive, error)
	// progress, when set, is the record Progress answers for rd_1.
	progress *sender.Redrive
	// maxRedrive, when set, is the sender's bound on a redrive's limit.
	maxRedrive int
	// history is what settled, newest first; resent the resends that
	// were not dry runs.
	history []*sender.Meta
	resent  []sender.HistoryQuery
	// historyCalls counts History's calls.
	historyCalls int
}

// orphan is a destination the fake holds letters of but that is not
// configured.
const orphan = "gone"

// onceStore is a real embedded store in a temporary file, for the
// console's confirm tokens.
func onceStore(t testing.TB, dir string) OnceStore {
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := boltstore.New(db, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		_ = db.Close()
	})
	return s
}

// newConsole is a console over svc with its own token store.
func newConsole(t testing.TB, svc Service) *Console {
	return New(svc, onceStore(t, t.TempDir()), nil)
}

func newFake() *fakeService {
	f := &fakeService{dead: map[string]*sender.Envelope{}}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, d := range []string{"a", "b"} {
		for _, id := range []string{"1", "x/y", "<b>"} {
			f.dead[d+"/"+id] = &sender.Envelope{ID: id, Destination: d, Class: sender.ClassHTTP4xx, LastStatus: 400,
				LastError: "<script>alert(1)</script>", DeadAt: t0, Payload: []byte(`{"html":"<script>x</script>"}`),
				Log: []sender.Attempt{{At: t0, Status: 400, Error: "Bad Request"}}}
		}
	}
	return f
}

func (f *fakeService) note(dest string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, dest)
}

func (f *fakeService) Destinations(ctx context.Context) ([]sender.DestinationStatus, error) {
	f.note("")
	return []sender.DestinationStatus{{Name: "a", State: "active", Breaker: "closed", Depth: map[string]int{"queued": 5, "waiting": 4, "held": 2}},
		{Name: "b", State: "active", Breaker: "closed", Depth: map[string]int{}},
		{Name: orphan, State: sender.StateOrphaned, Depth: map[string]int{"dead": 1}}}, nil
}

func (f *fakeService) Destination(ctx context.Context, name string) (sender.DestinationStatus, error) {
	f.note(name)
	return sender.DestinationStatus{Name: name, State: "active", Breaker: "closed", Depth: map[string]int{}}, nil
}

func (f *fakeService) SetPaused(ctx context.Context, name string, paused bool, by string) (sender.DestinationStatus, error) {
	f.note(name)
	return f.Destination(ctx, name)
}

func (f *fakeService) matching(fl sender.Filter) []*sender.Envelope {
	var out []*sender.Envelope
	for _, e := range f.dead {
		if fl.Destination == "" || e.Destination == fl.Destination {
			if len(fl.IDs) == 0 || fl.IDs[0] == e.ID {
				out = append(out, e)
			}
		}
	}
	return out
}

func (f *fakeService) Summary(ctx context.Context, fl sender.Filter, upTo int) ([]sender.Group, int, bool, error) {
	f.note(fl.Destination)
	n := len(f.matching(fl))
	return []sender.Group{{Destination: fl.Destination, Class: "http_4xx", Count: min(n, upTo)}}, min(n, upTo), n > upTo, nil
}

func (f *fakeService) Count(ctx context.Context, fl sender.Filter, upTo int) (int, bool, error) {
	f.note(fl.Destination)
	n := len(f.matching(fl))
	return min(n, upTo), n > upTo, nil
}

func (f *fakeService) List(ctx context.Context, fl sender.Filter, limit int, cursor string) ([]*sender.Meta, string, error) {
	f.note(fl.Destination)
	var out []*sender.Meta
	for _, e := range f.matching(fl) {
		out = append(out, sender.MetaOf(e))
	}
	return out, "", nil
}

func (f *fakeService) Get(ctx context.Context, dest, id string) (*sender.Envelope, sender.State, error) {
	f.note(dest)
	if e, ok := f.dead[dest+"/"+id]; ok {
		return e, sender.StateDead, nil
	}
	return nil, "", sender.ErrNotFound
}

func (f *fakeService) HeaderSent(e *sender.Envelope) (http.Header, error) {
	if e.Destination == orphan {
		return nil, sender.ErrUnknownDestination
	}
	return http.Header{"Webhook-Id": {e.ID}}, nil
}

func (f *fakeService) Redrive(ctx context.Context, fl sender.Filter, limit int, by string, dryRun bool) (*sender.Redrive, error) {
	f.note(fl.Destination)
	if f.maxRedrive > 0 && limit > f.maxRedrive {
		return nil, fmt.Errorf("%w: %d; want 1 to %d (max_redrive)", sender.ErrBadLimit, limit, f.maxRedrive)
	}
	if fl.Destination == orphan {
		return nil, fmt.Errorf("%w: %q: move its letters to a configured destination first", sender.ErrOrphaned, fl.Destination)
	}
	f.mu.Lock()
	f.redrive = append(f.redrive, fl)
	m := f.matching(fl)
	r := &sender.Redrive{Filter: fl, Limit: limit, Matched: len(m), By: by}
	if dryRun {
		f.mu.Unlock()
		return r, nil
	}
	f.moves++
	n, hook := f.moves, f.onRedrive
	f.mu.Unlock()
	if hook != nil {
		return hook(ctx, n)
	}
	r.ID, r.Moved = fmt.Sprintf("rd_%d", n), min(len(m), limit)
	return r, nil
}

// redrives is how many redrives were not dry runs.
func (f *fakeService) redrives() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.moves
}

func (f *fakeService) Progress(ctx context.Context, id string, scope sender.Scope) (*sender.Redrive, error) {
	f.note(scope.Destination)
	if id != "rd_1" || !scope.Sees("b") {
		return nil, sender.ErrNotFound
	}
	if f.progress != nil {
		return f.progress, nil
	}
	return &sender.Redrive{ID: id, Filter: sender.Filter{Destination: "b"}, By: "operator from 10.0.0.1",
		Letters: []sender.Letter{{Destination: "b", ID: "1", Outcome: "dead_again", LastError: "<i>no</i>"}}}, nil
}

// csrfToken is the browser's CSRF token in the tests.
const csrfToken = "TOKENTOKENTOKENTOKENTOKEN1"

// request serves one request; a POST carries the form with a valid token
// unless the form sets csrf itself.
func request(c *Console, v View, method, target string, form url.Values) *httptest.ResponseRecorder {
	return send(context.Background(), c, v, method, target, form, csrfToken)
}

// send is request with a context and the browser's CSRF cookie.
func send(ctx context.Context, c *Console, v View, method, target string, form url.Values, token string) *httptest.ResponseRecorder {
	var r *http.Request
	if method == http.MethodPost {
		if form == nil {
			form = url.Values{}
		}
		if _, ok := form["csrf"]; !ok {
			form.Set("csrf", token)
		}
		r = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	r = r.WithContext(ctx)
	r.AddCookie(&http.Cookie{Name: csrfCookie, Value: token})
	r.Header.Set("Accept", "text/html")
	w := httptest.NewRecorder()
	c.Serve(w, r, v)
	return w
}

func TestPagesEscapeWhatTheyShow(t *testing.T) {
	c := newConsole(t, newFake())
	for _, target := range []string{"/dead", "/dead/%3Cb%3E?destination=a"} {
		w := request(c, View{}, "GET", target, nil)
		body := w.Body.String()
		if w.Code != 200 || strings.Contains(body, "<script>") || strings.Contains(body, "<b>") || !strings.Contains(body, "&lt;script&gt;") {
			t.Errorf("GET %s: %d; want markup escaped:\n%s", target, w.Code, body)
		}
		if !strings.Contains(w.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: no CSP", target)
		}
	}
	// An ID with a slash is one segment, escaped in links.
	w := request(c, View{Base: "/console"}, "GET", "/dead?destination=a", nil)
	if !strings.Contains(w.Body.String(), `href="/console/dead/x%2fy?destination=a"`) && !strings.Contains(w.Body.String(), `href="/console/dead/x%2Fy?destination=a"`) {
		t.Errorf("no escaped link to x/y:\n%s", w.Body.String())
	}
	if w := request(c, View{}, "GET", "/dead/x%2Fy?destination=a", nil); w.Code != 200 {
		t.Errorf("GET x/y: %d", w.Code)
	}
}

func TestRefusals(t *testing.T) {
	c := newConsole(t, newFake())
	for _, tt := range []struct {
		method, target string
		form           url.Values
		status         int
		reason         string
	}{
		{"GET", "/nowhere", nil, 404, "not_found"},
		{"DELETE", "/dead", nil, 405, "method_not_allowed"},
		{"GET", "/redrive", nil, 405, "method_not_allowed"},
		{"GET", "/assets/nope.css", nil, 404, "not_found"},
		{"POST", "/redrive", url.Values{"limit": {"1"}, "pad": {strings.Repeat("x", 70<<10)}}, 413, "body_too_large"},
		{"POST", "/", nil, 405, "method_not_allowed"},
		{"GET", "/dead/replay", nil, 404, "not_found"},
		{"GET", "/dead/1/replay", nil, 405, "method_not_allowed"},
		{"GET", "/dead/missing?destination=a", nil, 404, "not_found"},
		{"GET", "/dead?since=yesterday", nil, 400, "bad_request"},
		{"GET", "/redrives/rd_2", nil, 404, "not_found"},
		{"POST", "/redrive", url.Values{"limit": {"0"}}, 400, "bad_limit"},
		{"POST", "/redrive", url.Values{"limit": {"101"}}, 400, "bad_limit"},
		{"POST", "/redrive", url.Values{"limit": {"ten"}}, 400, "bad_limit"},
		{"POST", "/dead/1/replay", url.Values{}, 400, "bad_request"},
		{"POST", "/dead/1/replay", url.Values{"destination": {"a"}, "csrf": {""}}, 403, "csrf_token_invalid"},
		{"POST", "/dead/1/replay", url.Values{"destination": {"a"}, "csrf": {"TOKENTOKENTOKENTOKENTOKEN2"}}, 403, "csrf_token_invalid"},
	} {
		w := request(c, View{}, tt.method, tt.target, tt.form)
		if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.reason) {
			t.Errorf("%s %s: %d, want %d %s:\n%s", tt.method, tt.target, w.Code, tt.status, tt.reason, w.Body.String())
		}
	}
	if w := request(c, View{}, "DELETE", "/dead", nil); w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("405 Allow = %q", w.Header().Get("Allow"))
	}
	if w := request(c, View{}, "GET", "/redrive", nil); w.Header().Get("Allow") != "POST" {
		t.Errorf("405 Allow = %q", w.Header().Get("Allow"))
	}
	// The outcome page escapes a letter's error and names who only to the operator.
	w := request(c, View{}, "GET", "/redrives/rd_1", nil)
	if body := w.Body.String(); w.Code != 200 || strings.Contains(body, "<i>") || !strings.Contains(body, "dead again") || !strings.Contains(body, "operator from") {
		t.Errorf("outcome page: %d\n%s", w.Code, body)
	}
	if w := request(c, View{Scope: sender.Scope{Destination: "b"}}, "GET", "/redrives/rd_1", nil); w.Code != 200 || strings.Contains(w.Body.String(), "operator from") {
		t.Errorf("a subscriber's outcome page names the operator: %d", w.Code)
	}
	// Not a browser: problem+json.
	r := httptest.NewRequest("GET", "/nowhere", nil)
	w = httptest.NewRecorder()
	c.Serve(w, r, View{})
	if w.Code != 404 || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("a non-browser 404: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
}

// TestScopeHolds: every call a scoped console makes names its scope,
// whatever the request asks for.
func TestScopeHolds(t *testing.T) {
	f := newFake()
	c := newConsole(t, f)
	v := View{Scope: sender.Scope{Destination: "a"}, By: "console"}
	for _, tt := range []struct {
		method, target string
		form           url.Values
		status         int
	}{
		{"GET", "/", nil, 200},
		{"GET", "/dead?destination=b", nil, 200},
		{"GET", "/dead/1?destination=b", nil, 200}, // a's envelope 1, not b's
		{"POST", "/dead/1/replay", url.Values{"destination": {"b"}}, 303},
		{"POST", "/redrive", url.Values{"destination": {"b"}, "limit": {"5"}}, 200},
		{"POST", "/destinations/b/pause", nil, 404},
		{"GET", "/redrives/rd_1", nil, 404}, // b's redrive
	} {
		if w := request(c, v, tt.method, tt.target, tt.form); w.Code != tt.status {
			t.Errorf("%s %s: %d, want %d:\n%s", tt.method, tt.target, w.Code, tt.status, w.Body.String())
		}
	}
	form := url.Values{"destination": {"b"}, "limit": {"5"}}
	form.Set("once", previewToken(t, c, v, form))
	form.Set("confirm", "yes")
	if w := request(c, v, "POST", "/redrive", form); w.Code != 303 {
		t.Errorf("confirmed redrive: %d, want 303:\n%s", w.Code, w.Body.String())
	}
	for _, d := range f.asked {
		if d != "a" {
			t.Fatalf("a console scoped to a asked the service about %q (all: %q)", d, f.asked)
		}
	}
	if w := request(c, v, "GET", "/dead", nil); strings.Contains(w.Body.String(), `<option value="b"`) {
		t.Error("a scoped list offers other destinations")
	}
}

func TestRedriveIsPreviewedThenConfirmed(t *testing.T) {
	f := newFake()
	c := newConsole(t, f)
	w := request(c, View{Base: "/c"}, "POST", "/redrive", url.Values{"destination": {"b"}, "limit": {"2"}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `id="matched">3<`) || !strings.Contains(w.Body.String(), `id="moves">2<`) {
		t.Fatalf("preview: %d\n%s", w.Code, w.Body.String())
	}
	form := url.Values{"destination": {"b"}, "limit": {"2"}}
	form.Set("once", previewToken(t, c, View{Base: "/c"}, form))
	form.Set("confirm", "yes")
	w = request(c, View{Base: "/c"}, "POST", "/redrive", form)
	if w.Code != 303 || w.Header().Get("Location") != "/c/redrives/rd_1" {
		t.Fatalf("confirmed: %d %q", w.Code, w.Header().Get("Location"))
	}
}

func TestCrossOriginPostRefused(t *testing.T) {
	c := newConsole(t, newFake())
	r := httptest.NewRequest("POST", "http://gw.example/dead/1/replay", strings.NewReader("destination=a"))
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	w := httptest.NewRecorder()
	c.Serve(w, r, View{})
	if w.Code != 403 || !strings.Contains(w.Body.String(), "cross_origin_request") {
		t.Fatalf("cross-site POST: %d %s", w.Code, w.Body.String())
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		0: "0s", 59 * time.Second: "59s", 61 * time.Second: "1m", 90 * time.Minute: "1h30m",
		47 * time.Hour: "47h00m", 72 * time.Hour: "3d", -time.Hour: "0s",
	} {
		if got := age(now, now.Add(-d)); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
	if age(now, time.Time{}) != "–" {
		t.Error("a zero time has an age")
	}
}

func TestShowPayload(t *testing.T) {
	if s, note := showPayload([]byte{0xff, 0xfe}); s != "" || !strings.Contains(note, "not UTF-8") {
		t.Errorf("binary: %q %q", s, note)
	}
	big := []byte(strings.Repeat("é", maxShown)) // 2 bytes each: cut mid-rune
	s, note := showPayload(big)
	if len(s) > maxShown || !strings.Contains(note, "first 64 KiB") || !strings.HasSuffix(s, "é") {
		t.Errorf("long payload: %d bytes shown, %q", len(s), note)
	}
}

// FuzzServe: no request makes the console panic, answer outside its
// statuses, or ask the service about a destination outside its scope.
func FuzzServe(f *testing.F) {
	f.Add("GET", "/dead/1", "destination=b")
	f.Add("POST", "/dead/x%2Fy/replay", "destination=b")
	f.Add("POST", "/redrive", "destination=b&limit=3&confirm=yes&since=2026-01-01T00:00:00Z")
	f.Add("POST", "/destinations/b/resume", "")
	f.Add("GET", "/redrives/rd_1", "")
	f.Add("GET", "/dead?cursor=0|1:x&class=gone", "")
	f.Add("GET", "/deliveries?destination=b&state=dead&cursor=3", "")
	f.Add("GET", "/deliveries/x%2Fy?destination=b", "")
	f.Add("POST", "/resend", "destination=b&id=1&limit=1&confirm=yes&once=x")
	once := onceStore(f, f.TempDir())
	f.Fuzz(func(t *testing.T, method, target, form string) {
		if !strings.HasPrefix(target, "/") {
			return
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || strings.ContainsAny(method, " \t\r\n") || method == "" || !validMethod(method) {
			return
		}
		fake := newFake()
		c := New(fake, once, nil)
		r := httptest.NewRequest("GET", "/", strings.NewReader(form))
		r.Method, r.URL, r.RequestURI = method, u, target
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(&http.Cookie{Name: csrfCookie, Value: "TOKENTOKENTOKENTOKENTOKEN1"})
		w := httptest.NewRecorder()
		c.Serve(w, r, View{Scope: sender.Scope{Destination: "a"}})
		switch w.Code {
		case 200, 303, 400, 403, 404, 405, 409, 413:
		default:
			t.Fatalf("%s %s %q: status %d", method, target, form, w.Code)
		}
		for _, d := range fake.asked {
			if d != "a" {
				t.Fatalf("%s %s %q: asked about %q", method, target, form, d)
			}
		}
	})
}

func validMethod(m string) bool {
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// TestProgressShowsSuperseded: a redrive's outcome page counts the
// letters a later redrive moved again, and names them so.
func TestProgressShowsSuperseded(t *testing.T) {
	f := newFake()
	f.progress = &sender.Redrive{ID: "rd_1", Filter: sender.Filter{Destination: "b"}, Matched: 5, Moved: 5,
		Delivered: 1, DeadAgain: 1, Superseded: 2, Pending: 1,
		Letters: []sender.Letter{{Destination: "b", ID: "1", Outcome: "superseded"}, {Destination: "b", ID: "2", Outcome: "pending"}}}
	c := newConsole(t, f)
	w := request(c, View{}, "GET", "/redrives/rd_1", nil)
	body := w.Body.String()
	for _, want := range []string{`id="superseded">2<`, `id="pending">1<`, `<td class="outcome superseded">superseded: moved again later<`, "refreshes every 2 seconds"} {
		if w.Code != 200 || !strings.Contains(body, want) {
			t.Errorf("outcome page: %d, no %s:\n%s", w.Code, want, body)
		}
	}
}

// TestSenderBoundIsABadLimit: a limit the console allows but the
// sender's max_redrive refuses is a 400 that says so, not a 503 blaming
// the store.
func TestSenderBoundIsABadLimit(t *testing.T) {
	f := newFake()
	f.maxRedrive = 5
	c := newConsole(t, f)
	w := request(c, View{}, "POST", "/redrive", url.Values{"destination": {"b"}, "limit": {"6"}})
	if body := w.Body.String(); w.Code != 400 || !strings.Contains(body, "bad_limit") || !strings.Contains(body, "max_redrive") {
		t.Fatalf("a limit over the sender's max_redrive: %d\n%s", w.Code, body)
	}
}

// TestOrphanedDestination: the dead letters of a destination no longer
// configured stay readable (detail and list, without a replay button or
// a redrive form), the health table lists it without a pause button, and
// a hand-made replay or redrive of them is a 409 that names the remedy,
// not a 503 blaming the store.
func TestOrphanedDestination(t *testing.T) {
	f := newFake()
	f.dead[orphan+"/1"] = &sender.Envelope{ID: "1", Destination: orphan, Class: sender.ClassHTTP4xx, LastStatus: 400, Payload: []byte(`{}`)}
	c := newConsole(t, f)
	w := request(c, View{}, "GET", "/dead/1?destination="+orphan, nil)
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, `id="orphaned"`) || strings.Contains(body, `id="replay"`) {
		t.Errorf("an orphan's dead letter: %d\n%s", w.Code, body)
	}
	w = request(c, View{}, "GET", "/dead?destination="+orphan, nil)
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, `id="orphaned"`) || strings.Contains(body, `id="redrive"`) || !strings.Contains(body, `data-id="1"`) {
		t.Errorf("an orphan's list: %d\n%s", w.Code, body)
	}
	if w := request(c, View{}, "GET", "/dead?destination=b", nil); strings.Contains(w.Body.String(), `id="orphaned"`) || !strings.Contains(w.Body.String(), `id="redrive"`) {
		t.Errorf("a configured destination's list says orphaned, or has no redrive form")
	}
	w = request(c, View{}, "GET", "/", nil)
	if body := w.Body.String(); w.Code != 200 || strings.Contains(body, "/destinations/"+orphan+"/pause") || !strings.Contains(body, "/destinations/b/pause") {
		t.Errorf("the health table offers to pause an orphan, or not a configured destination: %d\n%s", w.Code, body)
	}
	for _, tt := range []struct {
		target string
		form   url.Values
	}{
		{"/dead/1/replay", url.Values{"destination": {orphan}}},
		{"/redrive", url.Values{"destination": {orphan}, "limit": {"1"}}},
	} {
		w := request(c, View{}, "POST", tt.target, tt.form)
		if body := w.Body.String(); w.Code != 409 || !strings.Contains(body, "destination_orphaned") || !strings.Contains(body, "move its letters") {
			t.Errorf("POST %s of an orphan's letters: %d\n%s", tt.target, w.Code, body)
		}
	}
}

// TestProgressShowsWhereARedriveStopped: a redrive whose store failed
// part-way says so on its page (the error itself to the operator only),
// not just "Done." once what moved has settled.
func TestProgressShowsWhereARedriveStopped(t *testing.T) {
	f := newFake()
	f.progress = &sender.Redrive{ID: "rd_1", Filter: sender.Filter{Destination: "b"}, Limit: 5, Matched: 5, Moved: 2, Delivered: 2,
		Error: "dial tcp 10.1.2.3:6379: connection refused"}
	c := newConsole(t, f)
	body := request(c, View{}, "GET", "/redrives/rd_1", nil).Body.String()
	if !strings.Contains(body, `id="redrive-error"`) || !strings.Contains(body, "after 2 of at most 5") || !strings.Contains(body, "10.1.2.3") {
		t.Errorf("the operator's page of a redrive that stopped early:\n%s", body)
	}
	body = request(c, View{Scope: sender.Scope{Destination: "b"}}, "GET", "/redrives/rd_1", nil).Body.String()
	if !strings.Contains(body, `id="redrive-error"`) || strings.Contains(body, "10.1.2.3") {
		t.Errorf("a subscriber's page of a redrive that stopped early:\n%s", body)
	}
}

// TestOverviewShowsOrderedDepth: the health table shows what an ordered
// destination holds waiting, and its held entities.
func TestOverviewShowsOrderedDepth(t *testing.T) {
	w := request(newConsole(t, newFake()), View{}, "GET", "/", nil)
	body := w.Body.String()
	for _, want := range []string{">Waiting</th>", ">Held</th>", "<td class=\"num\">4</td>\n<td class=\"num held\">2</td>"} {
		if w.Code != 200 || !strings.Contains(body, want) {
			t.Errorf("the overview: %d, want %q in\n%s", w.Code, want, body)
		}
	}
}

// TestRefuseHidesTheLink: a refused portal link's page sends no
// referrer (its URL holds the token) and carries the console's policy.
func TestRefuseHidesTheLink(t *testing.T) {
	c := newConsole(t, newFake())
	r := httptest.NewRequest("GET", "/?token=x.y", nil)
	r.Header.Set("Accept", "text/html")
	w := httptest.NewRecorder()
	c.Refuse(w, r, View{}, portal.ErrExpired)
	if w.Code != 403 || w.Header().Get("Referrer-Policy") != "no-referrer" || !strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'none'") ||
		!strings.Contains(w.Body.String(), "portal_link_expired") {
		t.Errorf("%d %v\n%s", w.Code, w.Header(), w.Body.String())
	}
}
