package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/hookgate/hookgate/internal/redistest"
)

// consoleFixture is a sender gateway on Redis with 30 dead letters over
// three destinations and two error classes:
//
//	a: 12 http_4xx (a-4xx-00..11), 3 http_5xx (a-5xx-00..02)
//	b: 5 http_4xx, 5 http_5xx
//	c: 5 http_4xx whose events had in fact landed: c's receiver is a
//	   hookgate (verify + dedupe) that applied them, and only its answer
//	   was lost on the way back
//
// Once healthy is set, every receiver applies what it gets.
type consoleFixture struct {
	redis   *redistest.Server
	g       *gateway
	up      *upstream
	healthy atomic.Bool
	mu      sync.Mutex
	applied map[string]int
	// global and site are the sender gateway's config: another instance
	// started with them shares its queue.
	global, site string
}

func newConsoleFixture(t *testing.T) *consoleFixture {
	srv := redistest.Start(t)
	f := &consoleFixture{redis: srv, applied: map[string]int{}}
	f.up = newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		id := r.Header.Get("Webhook-Id")
		if !f.healthy.Load() {
			switch {
			case strings.Contains(id, "-4xx-"):
				w.WriteHeader(400)
				return
			case strings.Contains(id, "-5xx-"):
				w.WriteHeader(503)
				return
			}
		}
		f.mu.Lock()
		f.applied[id]++
		f.mu.Unlock()
		_, _ = w.Write([]byte(`{"applied":true}`))
	})
	recv := startGateway(t, dedupeSite(f.up.Addr(), ""), gatewayOptions{Global: redisGlobal(srv.URL())})
	target, _ := url.Parse(recv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	lossy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.healthy.Load() {
			proxy.ServeHTTP(httptest.NewRecorder(), r) // applied and recorded
			w.WriteHeader(400)                         // the answer is lost
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(lossy.Close)

	users := ""
	for _, u := range []string{"a", "b"} {
		hash, err := exec.Command(binary, "hash-password", "--plaintext", "pw-"+u).Output()
		if err != nil {
			t.Fatalf("hash-password: %v", err)
		}
		users += fmt.Sprintf("\t\t\t%s %s\n", u, strings.TrimSpace(string(hash)))
	}
	global := fmt.Sprintf(`hookgate {
		store redis %s
		key_prefix %s
		sender {
			attempts 2
			backoff 10ms 20ms
			timeout 2s
			lease 5s
			breaker {
				failures 1000 # a's six 503s must not open it: the last would wait out its 30s
			}
		}
		destination a {
			url %s
			secret %s
		}
		destination b {
			url %s
			secret %s
		}
		destination c {
			url %s
			secret %s
		}
	}`, srv.URL(), redistest.Prefix("it"), f.up.URL, devSecret, f.up.URL, devSecret, lossy.URL, devSecret)
	site := fmt.Sprintf(`handle_path /console/* {
		webhook_console
	}
	handle_path /my/* {
		basic_auth {
%s		}
		webhook_console {
			destination {http.auth.user.id}
		}
	}`, users)
	f.global, f.site = global, site
	f.g = startGateway(t, site, gatewayOptions{Global: global})

	enqueue := func(dest, id, payload string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the payload's markup reaches the queue as is
		if err := enc.Encode(map[string]any{"id": id, "event_type": "reservation.confirmed", "entity": "r-" + id, "payload": json.RawMessage(payload)}); err != nil {
			t.Fatal(err)
		}
		body := buf.Bytes()
		if st, _, got := post(t, f.g.Admin+"/hookgate/destinations/"+dest+"/enqueue", nil, body); st != 202 {
			t.Fatalf("enqueue %s: %d %s", id, st, got)
		}
	}
	for i := range 12 {
		payload := fmt.Sprintf(`{"reservation_id":"r-%d","seat":%d}`, i, i)
		if i == 0 { // a payload that must be shown, never run
			payload = `{"note":"<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"}`
		}
		enqueue("a", fmt.Sprintf("a-4xx-%02d", i), payload)
	}
	for i := range 3 {
		enqueue("a", fmt.Sprintf("a-5xx-%02d", i), `{"seat":1}`)
	}
	for i := range 5 {
		enqueue("b", fmt.Sprintf("b-4xx-%02d", i), `{"seat":2}`)
		enqueue("b", fmt.Sprintf("b-5xx-%02d", i), `{"seat":3}`)
		enqueue("c", fmt.Sprintf("c-landed-%02d", i), `{"seat":4}`)
	}
	deadline := time.Now().Add(30 * time.Second)
	for f.deadTotal(t) != 30 {
		if time.Now().After(deadline) {
			t.Fatalf("30 dead letters never showed: %d", f.deadTotal(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return f
}

func (f *consoleFixture) deadTotal(t *testing.T) int {
	var s struct{ Total int }
	f.adminGet(t, "/hookgate/dlq/summary", &s)
	return s.Total
}

// adminGet reads an admin API answer into v; it returns the status.
func (f *consoleFixture) adminGet(t *testing.T, path string, v any) int {
	t.Helper()
	return getJSON(t, f.g.Admin+path, v)
}

// getJSON gets url, decodes a 200's body into v (when not nil), and
// returns the status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
	}
	return resp.StatusCode
}

func (f *consoleFixture) appliedCount(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied[id]
}

// browser starts headless Chromium (Debian's chromium package). A missing
// browser fails the test: .ci/run installs it. Under -short (the fast
// tier, which needs no Chromium) the test skips instead.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Chromium: skipped under -short")
	}
	path := ""
	for _, p := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if found, err := exec.LookPath(p); err == nil {
			path = found
			break
		}
	}
	if path == "" {
		t.Fatal("no Chromium on PATH: install Debian's chromium package (.ci/run does)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", path, err)
	}
	// Each step gets a bound; the browser lives as long as the test.
	ctx, cancel3 := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel3)
	return ctx
}

// fatal fails the test with the browser's error and where it was.
func fatal(t *testing.T, ctx context.Context, err error) {
	t.Helper()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
	t.Fatalf("browser: %v\nat %s:\n%s", err, loc, html)
}

// run runs browser steps in order.
func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		fatal(t, ctx, err)
	}
}

// value runs one browser action and returns its value.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		fatal(t, ctx, err)
	}
	return v
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	return value(t, ctx, chromedp.Evaluate[T](js))
}

// text is the trimmed text of the first element sel matches.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(value(t, ctx, chromedp.Text(chromedp.CSS(sel))))
}

// screenshot takes a full-page PNG of the current page and checks it;
// with -update it is kept as docs/console/<name>.png for docs/sending.md.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	// A page just loaded (a redirect, a refresh) may not be laid out yet:
	// Chromium then has no width to take; try again for a moment.
	var buf []byte
	for try := 0; ; try++ {
		var err error
		if buf, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			break
		}
		if try == 20 {
			fatal(t, ctx, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(buf))
	if err != nil || cfg.Width < 800 || cfg.Height < 200 {
		t.Fatalf("screenshot %s: %v, %dx%d", name, err, cfg.Width, cfg.Height)
	}
	if *update {
		dir := filepath.Join("..", "docs", "console")
		// The screenshots are checked in: they take the repository's usual modes.
		if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: see above
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil { //nolint:gosec // G306: see above
			t.Fatal(err)
		}
	}
}

// waitDone waits for a redrive page (which refreshes itself while
// anything is pending) to say it is done.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector("#outcome.done")`))
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("the redrive never finished:\n%s", html)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsole drives the operator's console in headless Chromium: the
// summary counts 30 dead letters by destination and class, the detail
// shows the attempt log and the payload escaped, the replay button
// delivers one envelope, a bounded redrive of 5 of 12 moves exactly 5,
// and the replay of an event that had landed is answered by the
// receiver's dedupe: applied once in total.
func TestConsole(t *testing.T) {
	f := newConsoleFixture(t)
	ctx := browser(t)
	base := f.g.URL + "/console"

	// The summary.
	run(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#summary")))
	groups := eval[[][]string](t, ctx, `[...document.querySelectorAll("#summary tbody tr")].map(tr => [tr.dataset.destination, tr.dataset.class, tr.querySelector(".count").textContent.trim()])`)
	got := map[string]string{}
	for _, g := range groups {
		got[g[0]+"/"+g[1]] = g[2]
	}
	want := map[string]string{"a/http_4xx": "12", "a/http_5xx": "3", "b/http_4xx": "5", "b/http_5xx": "5", "c/http_4xx": "5"}
	if fmt.Sprint(got) != fmt.Sprint(want) || text(t, ctx, "#total") != "30" {
		t.Fatalf("summary %v, total %s; want %v, 30", got, text(t, ctx, "#total"), want)
	}
	// The three doors agree: the admin API and the CLI count the same.
	var api struct {
		Groups []struct {
			Destination, Class string
			Count              int
		}
	}
	f.adminGet(t, "/hookgate/dlq/summary", &api)
	fromAPI := map[string]string{}
	for _, g := range api.Groups {
		fromAPI[g.Destination+"/"+g.Class] = fmt.Sprint(g.Count)
	}
	out, err := cli(t, f.g, "dlq", "summary", "--format", "json")
	var fromCLI struct {
		Groups []struct {
			Destination, Class string
			Count              int
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &fromCLI) != nil || fmt.Sprint(fromAPI) != fmt.Sprint(want) || len(fromCLI.Groups) != len(api.Groups) {
		t.Fatalf("the admin API counts %v, the CLI %s (%v); the console %v", fromAPI, out, err, got)
	}
	if s := text(t, ctx, `#health tr[data-destination="b"] .breaker`); s != "closed" {
		t.Errorf("b's breaker shows %q", s)
	}
	screenshot(t, ctx, "overview")

	// The list, reached from the summary.
	f.healthy.Store(true)
	run(t, ctx, chromedp.Click(chromedp.CSS(`#summary tr[data-destination="a"][data-class="http_4xx"] a`)), chromedp.WaitVisible(chromedp.CSS("#entries")))
	rows := eval[int](t, ctx, `document.querySelectorAll("#entries tbody tr").length`)
	if m := text(t, ctx, "#matched"); m != "12" || rows != 12 {
		t.Fatalf("list of a/http_4xx: %s matched, %d rows; want 12", m, rows)
	}
	screenshot(t, ctx, "list")

	// The detail: a payload with markup is shown, not run.
	run(t, ctx, chromedp.Click(chromedp.CSS(`#entries tr[data-id="a-4xx-00"] a`)), chromedp.WaitVisible(chromedp.CSS("#payload")))
	title := value(t, ctx, chromedp.Title())
	if p := text(t, ctx, "#payload"); !strings.Contains(p, "<script>document.title='pwned'</script>") || strings.Contains(title, "pwned") {
		t.Fatalf("payload %q under title %q: want the markup shown as text", p, title)
	}

	// The detail of a transient failure: both attempts, and the header
	// sent without a secret.
	run(t, ctx, chromedp.Navigate(base+"/dead/b-5xx-00?destination=b"), chromedp.WaitVisible(chromedp.CSS("#attempts")))
	attempts := eval[[]string](t, ctx, `[...document.querySelectorAll("#attempts tbody tr")].map(tr => tr.children[2].textContent)`)
	if fmt.Sprint(attempts) != "[503 503]" || text(t, ctx, "#class") != "http_5xx" {
		t.Fatalf("attempt log %v, class %s; want two 503s, http_5xx", attempts, text(t, ctx, "#class"))
	}
	page := value(t, ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	secretBody := strings.TrimPrefix(devSecret, "whsec_")
	if strings.Contains(page, secretBody) || !strings.Contains(page, "Webhook-Signature") {
		t.Fatal("the detail page shows the secret, or no signature header")
	}
	screenshot(t, ctx, "detail")

	// Replay one envelope: it is delivered and leaves the DLQ.
	run(t, ctx, chromedp.Click(chromedp.CSS("#replay button")), chromedp.WaitVisible(chromedp.CSS("#redrive-id")))
	rid := text(t, ctx, "#redrive-id")
	waitDone(t, ctx)
	if !strings.HasPrefix(rid, "rd_") || text(t, ctx, "#delivered") != "1" || text(t, ctx, `#letters tr[data-id="b-5xx-00"] .outcome`) != "delivered" {
		t.Fatalf("replay %q: delivered %s", rid, text(t, ctx, "#delivered"))
	}
	if n := f.appliedCount("b-5xx-00"); n != 1 {
		t.Fatalf("b-5xx-00 applied %d times, want 1", n)
	}
	// Out of the queue: the dead-letter API answers what the queue
	// holds; a delivered envelope is the history's.
	if st := f.adminGet(t, "/hookgate/dlq/b-5xx-00?destination=b", nil); st != 404 {
		t.Fatalf("b-5xx-00 is still in the queue after its replay: %d", st)
	}
	var audit struct {
		By     string
		Filter struct{ IDs []string }
	}
	f.adminGet(t, "/hookgate/redrives/"+rid, &audit)
	if !strings.HasPrefix(audit.By, "console from 127.0.0.1") || fmt.Sprint(audit.Filter.IDs) != "[b-5xx-00]" {
		t.Errorf("audit record: %+v", audit)
	}
	screenshot(t, ctx, "redrive")

	// A bounded redrive: 5 of the 12 that match.
	run(t, ctx, chromedp.Navigate(base+"/dead?destination=a&class=http_4xx"), chromedp.WaitVisible(chromedp.CSS("#redrive")),
		chromedp.SetValue(chromedp.CSS(`#redrive input[name="limit"]`), "5"),
		chromedp.Click(chromedp.CSS(`#redrive button`)), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if m, l, mv := text(t, ctx, "#matched"), text(t, ctx, "#limit"), text(t, ctx, "#moves"); m != "12" || l != "5" || mv != "5" {
		t.Fatalf("preview: %s match, limit %s, moves %s; want 12, 5, 5", m, l, mv)
	}
	if f.deadTotal(t) != 29 {
		t.Fatal("the preview moved something")
	}
	screenshot(t, ctx, "confirm")
	run(t, ctx, chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#redrive-id")))
	waitDone(t, ctx)
	if mv, d := text(t, ctx, "#moved"), text(t, ctx, "#delivered"); mv != "5" || d != "5" {
		t.Fatalf("redrive of 5: moved %s, delivered %s", mv, d)
	}
	var s struct {
		Groups []struct {
			Destination, Class string
			Count              int
		}
	}
	f.adminGet(t, "/hookgate/dlq/summary?destination=a&class=http_4xx", &s)
	applied := 0
	for i := range 12 {
		applied += f.appliedCount(fmt.Sprintf("a-4xx-%02d", i))
	}
	if len(s.Groups) != 1 || s.Groups[0].Count != 7 || applied != 5 {
		t.Fatalf("after a redrive of 5 of 12: %+v left, %d applied", s.Groups, applied)
	}

	// The replay of an event that had landed: the receiver's dedupe
	// answers with the recorded outcome.
	before := f.up.count()
	run(t, ctx, chromedp.Navigate(base+"/dead/c-landed-00?destination=c"), chromedp.WaitVisible(chromedp.CSS("#replay")),
		chromedp.Click(chromedp.CSS("#replay button")), chromedp.WaitVisible(chromedp.CSS("#redrive-id")))
	waitDone(t, ctx)
	if d := text(t, ctx, "#delivered"); d != "1" || f.appliedCount("c-landed-00") != 1 || f.up.count() != before {
		t.Fatalf("replay of a landed event: delivered %s, applied %d times, %d new upstream requests; want 1, 1, 0",
			d, f.appliedCount("c-landed-00"), f.up.count()-before)
	}

	// Pause and resume from the health table.
	run(t, ctx, chromedp.Navigate(base+"/"), chromedp.Click(chromedp.CSS(`#health tr[data-destination="c"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#health tr[data-destination="c"] .state.paused`)),
		chromedp.Click(chromedp.CSS(`#health tr[data-destination="c"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#health tr[data-destination="c"] .state.active`)))

	// Redis goes away: each page says so, 503 store_unavailable, and
	// nothing hangs.
	f.redis.Stop()
	for _, page := range []string{"/", "/dead?destination=a", "/dead/a-4xx-11?destination=a", "/health"} {
		run(t, ctx, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.CSS("#reason")))
		if st, r := text(t, ctx, "#error-status"), text(t, ctx, "#reason"); !strings.HasPrefix(st, "503") || r != "store_unavailable" {
			t.Fatalf("%s with Redis down: %s %s", page, st, r)
		}
	}
}

// TestConsoleScoped: a console scoped to the signed-in subscriber shows
// only its destination's dead letters; a hand-made POST to replay another
// destination's is refused, and so is a POST without the CSRF token or
// from another origin.
func TestConsoleScoped(t *testing.T) {
	f := newConsoleFixture(t)
	ctx := browser(t)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("a:pw-a"))
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	base := f.g.URL + "/my"

	run(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#summary")))
	dests := eval[[]string](t, ctx, `[...document.querySelectorAll("#summary tbody tr, #health tbody tr")].map(tr => tr.dataset.destination)`)
	for _, d := range dests {
		if d != "a" {
			t.Fatalf("a's console shows destination %q: %v", d, dests)
		}
	}
	if text(t, ctx, "#total") != "15" || text(t, ctx, "#scope") != "destination a" {
		t.Fatalf("a's console: total %s, scope %q", text(t, ctx, "#total"), text(t, ctx, "#scope"))
	}
	screenshot(t, ctx, "subscriber")
	run(t, ctx, chromedp.Navigate(base+"/dead?destination=b"), chromedp.WaitVisible(chromedp.CSS("#entries")))
	ids := eval[[]string](t, ctx, `[...document.querySelectorAll("#entries tbody tr")].map(tr => tr.dataset.id)`)
	if len(ids) != 15 {
		t.Fatalf("a's list holds %d entries, want a's 15: %v", len(ids), ids)
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, "a-") {
			t.Fatalf("a's list shows %s", id)
		}
	}
	run(t, ctx, chromedp.Navigate(base+"/dead/b-4xx-00?destination=b"), chromedp.WaitVisible(chromedp.CSS("#reason")))
	if r := text(t, ctx, "#reason"); r != "not_found" {
		t.Fatalf("a's console on b's envelope: %s", r)
	}

	// Hand-made requests, with a's credentials and a's CSRF token.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values, h http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, html := do("GET", "/dead", nil, http.Header{"Accept": {"text/html"}})
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no CSRF token in the list page")
	}
	token := m[1]
	if st, body := do("POST", "/dead/b-4xx-00/replay", url.Values{"csrf": {token}, "destination": {"b"}}, nil); st != 404 || !strings.Contains(body, `"not_found"`) {
		t.Fatalf("a replaying b's envelope: %d %s", st, body)
	}
	_, html = do("POST", "/redrive", url.Values{"csrf": {token}, "destination": {"b"}, "limit": {"10"}}, http.Header{"Accept": {"text/html"}})
	once := regexp.MustCompile(`name="once" value="([^"]+)"`).FindStringSubmatch(html)
	if once == nil {
		t.Fatalf("no one-time token in a's redrive preview:\n%s", html)
	}
	if st, body := do("POST", "/redrive", url.Values{"csrf": {token}, "destination": {"b"}, "limit": {"10"}, "confirm": {"yes"}, "once": {once[1]}}, nil); st != 303 {
		t.Fatalf("a's redrive: %d %s", st, body)
	}
	var e struct{ State string }
	if f.adminGet(t, "/hookgate/dlq/b-4xx-00?destination=b", &e) != 200 || e.State != "dead" {
		t.Fatalf("b-4xx-00 after a's hand-made requests: %q, want still dead", e.State)
	}
	var s struct{ Total int }
	f.adminGet(t, "/hookgate/dlq/summary?destination=b", &s)
	if s.Total != 10 {
		t.Fatalf("b has %d dead letters after a's redrive, want its 10", s.Total)
	}
	if st, body := do("POST", "/dead/a-5xx-00/replay", url.Values{"destination": {"a"}}, nil); st != 403 || !strings.Contains(body, `"csrf_token_invalid"`) {
		t.Fatalf("a replay without the CSRF token: %d %s", st, body)
	}
	if st, body := do("POST", "/dead/a-5xx-00/replay", url.Values{"destination": {"a"}, "csrf": {"WRONGWRONGWRONGWRONGWRONGW"}}, nil); st != 403 || !strings.Contains(body, `"csrf_token_invalid"`) {
		t.Fatalf("a replay with a wrong CSRF token: %d %s", st, body)
	}
	cross := http.Header{"Origin": {"http://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}
	if st, body := do("POST", "/dead/a-5xx-00/replay", url.Values{"destination": {"a"}, "csrf": {token}}, cross); st != 403 || !strings.Contains(body, `"cross_origin_request"`) {
		t.Fatalf("a cross-origin replay: %d %s", st, body)
	}
	var left struct{ State string }
	if f.adminGet(t, "/hookgate/dlq/a-5xx-00?destination=a", &left) != 200 || left.State != "dead" {
		t.Fatalf("a-5xx-00 after refused POSTs: %q, want dead", left.State)
	}
	if st, _ := do("POST", "/dead/a-5xx-00/replay", url.Values{"destination": {"a"}, "csrf": {token}}, nil); st != 303 {
		t.Fatalf("a's own replay with its token: %d", st)
	}
	// The operator's console refuses a POST without a token too.
	req, _ := http.NewRequest("POST", f.g.URL+"/console/dead/a-5xx-01/replay", strings.NewReader("destination=a"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("the operator's console took a POST without a token: %d", resp.StatusCode)
	}
}
