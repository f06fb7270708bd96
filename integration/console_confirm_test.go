package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// balancer sends each request to the next of several gateways in turn,
// as a load balancer in front of instances sharing Redis does, and notes
// which instance served each POST of a redrive form. The POSTs of a
// redrive form take turns among themselves: a GET between two of them
// (a page's refresh, which a busy machine may delay into the middle)
// must not send both to one instance.
type balancer struct {
	*httptest.Server
	mu       sync.Mutex
	next     int
	nextPost int
	posted   []int
	// slow delays each POST, as a slow link does: it reaches the gateway
	// late, and even when the browser has given up on it meanwhile.
	slow time.Duration
}

func newBalancer(t *testing.T, gateways ...*gateway) *balancer {
	b := &balancer{}
	var proxies []*httputil.ReverseProxy
	for _, g := range gateways {
		u, _ := url.Parse(g.URL)
		proxies = append(proxies, httputil.NewSingleHostReverseProxy(u))
	}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		var i int
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/redrive") {
			i = b.nextPost
			b.nextPost = (b.nextPost + 1) % len(proxies)
			b.posted = append(b.posted, i)
		} else {
			i = b.next
			b.next = (b.next + 1) % len(proxies)
		}
		slow := b.slow
		b.mu.Unlock()
		if r.Method == http.MethodPost && slow > 0 {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			time.Sleep(slow)
			r = r.WithContext(context.WithoutCancel(r.Context()))
			r.Body = io.NopCloser(bytes.NewReader(body))
			// Without CloseNotify: the proxy forwards it whatever the
			// browser does meanwhile.
			w = struct{ http.ResponseWriter }{w}
		}
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(b.Close)
	return b
}

// posts returns the instance that served each redrive POST since the
// last call, in order, and forgets them.
func (b *balancer) posts() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.posted
	b.posted = nil
	return out
}

// both reports posts that reached both of two instances.
func both(posts []int) bool {
	return len(slices.Compact(slices.Sorted(slices.Values(posts)))) == 2
}

// TestConsoleConfirmOnce drives a redrive's confirm form in headless
// Chromium through a load balancer that alternates between two gateways
// sharing Redis. A double click on the confirm button moves one batch;
// the same form posted again, twice at once and so to both instances,
// moves nothing and lands on that redrive's outcome; a fresh form posted
// twice at once to both instances moves one batch; a confirm whose
// token is unknown, or bound to another limit, gets a page that says so.
func TestConsoleConfirmOnce(t *testing.T) {
	f := newConsoleFixture(t)
	f.healthy.Store(true)
	second := startGateway(t, f.site, gatewayOptions{Global: f.global})
	lb := newBalancer(t, f.g, second)
	ctx := browser(t)
	base := lb.URL + "/console"

	dead := func() int {
		var s struct{ Total int }
		f.adminGet(t, "/hookgate/dlq/summary?destination=a&class=http_4xx", &s)
		return s.Total
	}
	applied := func() int {
		n := 0
		for i := range 12 {
			n += f.appliedCount(fmt.Sprintf("a-4xx-%02d", i))
		}
		return n
	}
	waitApplied := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for applied() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d of a's 4xx letters applied, want %d", applied(), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// preview previews a redrive of a's 4xx letters and returns its
	// confirm form's fields.
	preview := func(limit string) map[string]string {
		t.Helper()
		run(t, ctx, chromedp.Navigate(base+"/dead?destination=a&class=http_4xx"), chromedp.WaitVisible(chromedp.CSS("#redrive")),
			chromedp.SetValue(chromedp.CSS(`#redrive input[name="limit"]`), limit),
			chromedp.Click(chromedp.CSS(`#redrive button`)), chromedp.WaitVisible(chromedp.CSS("#confirm")))
		return eval[map[string]string](t, ctx, `Object.fromEntries(new FormData(document.getElementById("confirm")))`)
	}
	// post sends form from the page n times at once (fetch: same origin,
	// the browser's cookie) and returns where each post ended.
	post := func(form map[string]string, n int) []string {
		t.Helper()
		fields, _ := json.Marshal(form)
		js := fmt.Sprintf(`Promise.all(Array.from({length: %d}, () => fetch("/console/redrive", {method: "POST", body: new URLSearchParams(%s), headers: {Accept: "text/html"}})
			.then(r => { const u = new URL(r.url); return r.status + " " + u.pathname + u.search; })))`, n, fields)
		return value(t, ctx, chromedp.Evaluate[[]string](js, chromedp.EvalAwaitPromise))
	}

	// A double click on the confirm button.
	form := preview("3")
	if form["once"] == "" {
		t.Errorf("the confirm form carries no one-time token: %v", form)
	}
	// A person's double click on a slow link: the second click submits
	// the form again while the first post is on its way, and the browser
	// gives up on the first (which still arrives).
	lb.posts()
	lb.mu.Lock()
	lb.slow = 300 * time.Millisecond
	lb.mu.Unlock()
	at := eval[[]float64](t, ctx, `(() => { const r = document.querySelector("#confirm button").getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`)
	run(t, ctx, chromedp.MouseClickXY(at[0], at[1]), chromedp.Sleep(100*time.Millisecond), chromedp.MouseClickXY(at[0], at[1], chromedp.ClickCount(2)),
		chromedp.WaitVisible(chromedp.CSS("#redrive-id")))
	lb.mu.Lock()
	lb.slow = 0
	lb.mu.Unlock()
	if p := lb.posts(); !both(p) {
		t.Fatalf("the double click's posts reached instances %v, want two posts, one to each", p)
	}
	waitDone(t, ctx)
	rid := text(t, ctx, "#redrive-id")
	if mv := text(t, ctx, "#moved"); mv != "3" || dead() != 9 {
		t.Fatalf("a double click on a confirm of 3: redrive %s moved %s, %d dead left; want 3 moved, 9 left", rid, mv, dead())
	}
	waitApplied(3)

	// The same form again, twice at once: to both instances.
	want := "200 /console/redrives/" + rid + "?resubmitted=1"
	if got := post(form, 2); got[0] != want || got[1] != want {
		t.Fatalf("the same confirm form posted again twice: %q, want both %q", got, want)
	}
	if p := lb.posts(); !both(p) {
		t.Fatalf("the posts reached instances %v, want both", p)
	}
	run(t, ctx, chromedp.Navigate(base+"/redrives/"+rid+"?resubmitted=1"), chromedp.WaitVisible(chromedp.CSS("#resubmitted")))
	if dead() != 9 || applied() != 3 {
		t.Fatalf("after the form was posted again: %d dead, %d applied; want 9, 3", dead(), applied())
	}

	// A fresh form posted twice at once, to both instances: one batch.
	form = preview("2")
	lb.posts()
	got := post(form, 2)
	first, _ := strings.CutSuffix(got[0], "?resubmitted=1")
	other, _ := strings.CutSuffix(got[1], "?resubmitted=1")
	resubmitted := strings.Count(strings.Join(got, " "), "?resubmitted=1")
	if first != other || !strings.HasPrefix(first, "200 /console/redrives/rd_") || resubmitted != 1 {
		t.Fatalf("one confirm form posted twice at once: %q; want one redrive, and the second post shown it", got)
	}
	if p := lb.posts(); !both(p) {
		t.Fatalf("the posts reached instances %v, want both", p)
	}
	if dead() != 7 {
		t.Fatalf("after a confirm of 2 posted twice at once: %d dead, want 7", dead())
	}
	waitApplied(5)

	// A token nobody issued, and one bound to another limit: nothing moves.
	for _, tt := range []struct{ field, value, reason string }{
		{"once", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ", "confirm_token_stale"},
		{"limit", "4", "confirm_token_mismatch"},
	} {
		preview("1")
		run(t, ctx, chromedp.SetValue(chromedp.CSS(`#confirm input[name="`+tt.field+`"]`), tt.value),
			chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#reason")))
		if st, r, d := text(t, ctx, "#error-status"), text(t, ctx, "#reason"), text(t, ctx, "#detail"); !strings.HasPrefix(st, "409") || r != tt.reason || !strings.Contains(d, "preview the redrive again") {
			t.Fatalf("a confirm with %s %s: %s %s %q", tt.field, tt.value, st, r, d)
		}
	}
	if dead() != 7 {
		t.Fatalf("refused confirms moved letters: %d dead, want 7", dead())
	}
}

// TestConsoleSuperseded: letters that died again after a redrive and are
// redriven again count as superseded on the first redrive's page.
func TestConsoleSuperseded(t *testing.T) {
	f := newConsoleFixture(t) // not healthy: b's 4xx letters die again
	ctx := browser(t)
	base := f.g.URL + "/console"
	redrive := func() string {
		t.Helper()
		run(t, ctx, chromedp.Navigate(base+"/dead?destination=b&class=http_4xx"), chromedp.WaitVisible(chromedp.CSS("#redrive")),
			chromedp.SetValue(chromedp.CSS(`#redrive input[name="limit"]`), "5"),
			chromedp.Click(chromedp.CSS(`#redrive button`)), chromedp.WaitVisible(chromedp.CSS("#confirm")),
			chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#redrive-id")))
		waitDone(t, ctx)
		return text(t, ctx, "#redrive-id")
	}
	first := redrive()
	if d := text(t, ctx, "#dead-again"); d != "5" {
		t.Fatalf("the first redrive of b's 5 rejected letters: %s dead again, want 5", d)
	}
	redrive()
	run(t, ctx, chromedp.Navigate(base+"/redrives/"+first), chromedp.WaitVisible(chromedp.CSS("#progress")))
	s := eval[string](t, ctx, `document.querySelector("#superseded")?.textContent ?? "not shown"`)
	if d := text(t, ctx, "#dead-again"); s != "5" || d != "0" {
		t.Fatalf("the first redrive after a second moved its letters again: %s superseded, %s dead again; want 5, 0", s, d)
	}
	if o := text(t, ctx, `#letters tr[data-id="b-4xx-00"] .outcome`); !strings.HasPrefix(o, "superseded") {
		t.Fatalf("b-4xx-00 on the first redrive's page: %q", o)
	}
}
