package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookgate/hookgate/portal"
)

// opEvent is an operational event as the operational destination
// receives it.
type opEvent struct {
	ID   string
	Type string `json:"type"`
	Data struct {
		Destination  string `json:"destination"`
		Tenant       string `json:"tenant"`
		Reason       string `json:"reason"`
		FailingSince string `json:"failing_since"`
		By           string `json:"by"`
		Count        int    `json:"count"`
	} `json:"data"`
}

// TestDisableAndOperationalEvents: through the binary, a destination
// whose attempts all fail is told failing after failing_after and
// disabled after disable_after (paused, its envelope kept), each told to
// the operational destination, signed, with the tenant; the tenant
// enables it from its portal, which tells destination.enabled and
// delivers what was kept. A 410 disables another at once, and its dead
// letter is told as dead_letter.created once its minute is over.
func TestDisableAndOperationalEvents(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	var mu sync.Mutex
	var events []opEvent
	recv := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch r.URL.Path {
		case "/ops":
			var ev opEvent
			if err := json.Unmarshal(body, &ev); err != nil {
				t.Errorf("an operational event that does not parse: %s", body)
			}
			ev.ID = r.Header.Get("Webhook-Id")
			if r.Header.Get("Webhook-Signature") == "" {
				t.Errorf("an operational event unsigned: %v", r.Header)
			}
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		case "/acme-orders":
			if !up.Load() {
				w.WriteHeader(503)
			}
		case "/acme-old":
			w.WriteHeader(410)
		}
	})
	of := func(typ string) []opEvent {
		mu.Lock()
		defer mu.Unlock()
		var out []opEvent
		for _, e := range events {
			if e.Type == typ {
				out = append(out, e)
			}
		}
		return out
	}
	port := freePort(t)
	portalURL := fmt.Sprintf("http://127.0.0.1:%d/portal/", port)
	dest := func(name, tenant, path string) string {
		return fmt.Sprintf("destination %s {\n\t\t\ttenant %s\n\t\t\turl %s%s\n\t\t\tsecret %s\n\t\t}", name, tenant, recv.URL, path, devSecret)
	}
	global := fmt.Sprintf(`hookgate {
		portal_key %s
		portal_url %s
		sender {
			backoff 50ms 100ms
			attempts 1000
			timeout 1s
			disable_after 3s
			failing_after 1s
			operational ops
			breaker {
				open 100ms
			}
		}
		%s
		%s
		destination ops {
			url %s/ops
			secret %s
		}
	}`, portalKey, portalURL, dest("orders", "acme", "/acme-orders"), dest("old", "acme", "/acme-old"), recv.URL, devSecret)
	site := `handle_path /portal/* {
		webhook_console {
			portal
		}
	}`
	g := startGateway(t, site, gatewayOptions{Global: global, Port: port})
	enqueueTo := func(dest, id string) {
		t.Helper()
		st, _, b := post(t, g.Admin+"/hookgate/destinations/"+url.PathEscape(dest)+"/enqueue", http.Header{"Content-Type": {"application/json"}},
			[]byte(`{"id":"`+id+`","payload":{"seat":"s1"}}`))
		if st != 202 {
			t.Fatalf("enqueue to %s: %d %s", dest, st, b)
		}
	}
	status := func(name string) (state, pausedBy string, depth map[string]int) {
		var v struct {
			Status struct {
				State    string         `json:"state"`
				PausedBy string         `json:"paused_by"`
				Depth    map[string]int `json:"depth"`
			}
		}
		getJSON(t, g.Admin+"/hookgate/destinations/"+url.PathEscape(name), &v)
		return v.Status.State, v.Status.PausedBy, v.Status.Depth
	}

	enqueueTo("acme/orders", "o-1")
	enqueueTo("acme/old", "x-1")
	waitFor(t, "acme/old disabled by its 410", func() bool { _, by, _ := status("acme/old"); return by == "gone" })
	waitFor(t, "destination.failing", func() bool { return len(of("destination.failing")) == 1 })
	waitFor(t, "acme/orders disabled", func() bool { _, by, _ := status("acme/orders"); return by == "disabled" })
	waitFor(t, "destination.disabled twice", func() bool { return len(of("destination.disabled")) == 2 })
	if _, _, depth := status("acme/orders"); depth["paused"] != 1 {
		t.Fatalf("acme/orders's envelope when disabled: %v, want kept, paused", depth)
	}
	for _, e := range of("destination.disabled") {
		want := map[string]string{"acme/orders": "failing", "acme/old": "gone"}[e.Data.Destination]
		if e.Data.Reason != want || e.Data.Tenant != "acme" || !strings.HasPrefix(e.ID, "hookgate.disabled.") {
			t.Errorf("destination.disabled: %+v", e)
		}
	}
	if f := of("destination.failing")[0]; f.Data.Destination != "acme/orders" || f.Data.Tenant != "acme" || f.Data.FailingSince == "" {
		t.Errorf("destination.failing: %+v", f)
	}
	if !strings.Contains(g.logs.String(), "destination disabled") {
		t.Errorf("no log line for the disablement")
	}
	for _, series := range []string{`hookgate_sender_disabled_total{destination="acme/orders",reason="failing"} 1`, `hookgate_sender_disabled_total{destination="acme/old",reason="gone"} 1`} {
		if !strings.Contains(g.Metrics(), series) {
			t.Errorf("metrics lack %s", series)
		}
	}

	// The tenant, from its portal, sees it disabled and enables it.
	out, err := cli(t, g, "portal-link", "--tenant", "acme")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	_, token := portalToken(t, out)
	ctx := browser(t)
	jarURL, _ := url.Parse(portalURL)
	run(t, ctx, chromedp.Navigate(portalURL+"?token="+url.QueryEscape(token)), chromedp.WaitVisible(chromedp.CSS(`#health tr[data-destination="acme/orders"]`)))
	if s := text(t, ctx, `#health tr[data-destination="acme/orders"] td.state`); s != "disabled (failing)" {
		t.Fatalf("the portal shows acme/orders %q", s)
	}
	screenshot(t, ctx, "portal-disabled")
	up.Store(true)
	run(t, ctx, chromedp.Click(chromedp.CSS(`#health tr[data-destination="acme/orders"] button`)), chromedp.WaitVisible(chromedp.CSS("#health")))
	waitFor(t, "destination.enabled", func() bool { return len(of("destination.enabled")) == 1 })
	if e := of("destination.enabled")[0]; e.Data.Destination != "acme/orders" || !strings.Contains(e.Data.By, "portal") {
		t.Errorf("destination.enabled: %+v", e)
	}
	waitFor(t, "o-1 delivered", func() bool {
		st, _, depth := status("acme/orders")
		return st == "active" && depth["queued"] == 0 && depth["paused"] == 0
	})

	// The operator enables through the admin API.
	st, _, b := post(t, g.Admin+"/hookgate/destinations/acme%2Fold/enable", nil, nil)
	if st != 200 || !strings.Contains(string(b), `"state":"active"`) {
		t.Fatalf("enable acme/old: %d %s", st, b)
	}
	waitFor(t, "destination.enabled for acme/old", func() bool { return len(of("destination.enabled")) == 2 })

	// A hand-made portal client cannot enable another tenant's, nor
	// resume what the operator paused.
	if st, _, _ := post(t, g.Admin+"/hookgate/destinations/acme%2Forders/pause", nil, nil); st != 200 {
		t.Fatalf("operator pause: %d", st)
	}
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(jarURL, []*http.Cookie{{Name: portal.Cookie, Value: token}})
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(portalURL + "dead")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(page))
	if csrf == nil {
		t.Fatalf("no CSRF token:\n%s", page)
	}
	for path, want := range map[string]int{"destinations/acme%2Forders/resume": 403, "destinations/ops/resume": 404} {
		resp, err := client.PostForm(portalURL+path, url.Values{"csrf": {csrf[1]}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("the portal's POST %s: %d, want %d", path, resp.StatusCode, want)
		}
	}

	// dead_letter.created, once x-1's minute is over.
	deadline := time.Now().Add(90 * time.Second)
	for len(of("dead_letter.created")) == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	dl := of("dead_letter.created")
	if len(dl) != 1 || dl[0].Data.Destination != "acme/old" || dl[0].Data.Count != 1 || dl[0].Data.Tenant != "acme" {
		t.Fatalf("dead_letter.created: %+v", dl)
	}
	for _, e := range events {
		if e.Data.Destination == "ops" {
			t.Errorf("told of the operational destination itself: %+v", e)
		}
	}
}
