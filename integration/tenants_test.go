package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/portal"
)

// portalKey is the tests' portal_key.
const portalKey = "portal-key-for-tests-0123456789abcdef"

// tenantsFixture is a gateway on the embedded store with two tenants,
// acme and globex, each with a Caddyfile destination named orders, and
// acme with an API destination billing too; its receiver answers 400
// (a dead letter at once) until healthy is set. The portal is served at
// /portal/.
type tenantsFixture struct {
	g       *gateway
	up      *upstream
	healthy atomic.Bool
	portal  string // the portal's URL
}

func newTenantsFixture(t *testing.T) *tenantsFixture {
	f := &tenantsFixture{}
	f.up = newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if !f.healthy.Load() {
			w.WriteHeader(400)
		}
	})
	port := freePort(t)
	f.portal = fmt.Sprintf("http://127.0.0.1:%d/portal/", port)
	global := fmt.Sprintf(`hookgate {
		portal_key {env.PORTAL_KEY}
		portal_url %s
		allow_networks 127.0.0.0/8
		sender {
			attempts 1
			timeout 2s
		}
		destination orders {
			tenant acme
			url %s/acme-orders
			secret whsec_dGVuYW50cy1hY21lLW9yZGVycy1zZWNyZXQ=
			events seat.*
		}
		destination orders {
			tenant globex
			url %s/globex-orders
			secret whsec_dGVuYW50cy1nbG9iZXgtb3JkZXJzLXNlY3I=
			events seat.*
		}
	}`, f.portal, f.up.URL, f.up.URL)
	site := `handle /events {
		webhook_enqueue {
			event_type {header.X-Event-Type}
			tenant {header.X-Tenant}
		}
	}
	handle_path /portal/* {
		webhook_console {
			portal
		}
	}`
	f.g = startGateway(t, site, gatewayOptions{Global: global, Port: port, Env: []string{"PORTAL_KEY=" + portalKey}})
	if out, err := cli(t, f.g, "destinations", "create", "acme/billing", "--url", f.up.URL+"/acme-billing", "--events", "seat.*"); err != nil {
		t.Fatalf("creating acme/billing: %v\n%s", err, out)
	}
	return f
}

// publish posts an event to the admin API with tenant ("" for none) and
// returns the destinations it reached.
func (f *tenantsFixture) publish(t *testing.T, id, tenant string) []string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"id": id, "event_type": "seat.released", "tenant": tenant, "payload": map[string]string{"seat": id}})
	st, _, b := post(t, f.g.Admin+"/hookgate/events", http.Header{"Content-Type": {"application/json"}}, body)
	if st != 202 {
		t.Fatalf("publishing %s for %q: %d %s", id, tenant, st, b)
	}
	var res struct {
		Deliveries []struct{ Destination string }
	}
	_ = json.Unmarshal(b, &res)
	var dests []string
	for _, d := range res.Deliveries {
		dests = append(dests, d.Destination)
	}
	slices.Sort(dests)
	return dests
}

// admin gets path from the admin API into v, and returns the status.
func (f *tenantsFixture) admin(t *testing.T, path string, v any) int {
	t.Helper()
	return getJSON(t, f.g.Admin+path, v)
}

// deadIDs lists the dead letters the admin API's query q matches.
func (f *tenantsFixture) deadIDs(t *testing.T, q string) []string {
	t.Helper()
	var page struct {
		Entries []struct{ ID, Destination string }
	}
	if st := f.admin(t, "/hookgate/dlq?limit=100&"+q, &page); st != 200 {
		t.Fatalf("dlq?%s: %d", q, st)
	}
	var ids []string
	for _, e := range page.Entries {
		ids = append(ids, e.Destination+":"+e.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestTenants: a fan-out reaches its tenant's subscribers only (the
// admin API's and webhook_enqueue's), one without a tenant none of
// theirs; two tenants' orders are distinct destinations; the admin API
// and the CLI filter by tenant.
func TestTenants(t *testing.T) {
	f := newTenantsFixture(t)
	if got := f.publish(t, "ev-acme-1", "acme"); !slices.Equal(got, []string{"acme/billing", "acme/orders"}) {
		t.Fatalf("acme's event reached %v", got)
	}
	if got := f.publish(t, "ev-globex-1", "globex"); !slices.Equal(got, []string{"globex/orders"}) {
		t.Fatalf("globex's event reached %v", got)
	}
	if got := f.publish(t, "ev-none-1", ""); len(got) != 0 {
		t.Fatalf("an event of no tenant reached %v", got)
	}
	st, _, b := post(t, f.g.URL+"/events", http.Header{"X-Event-Type": {"seat.released"}, "X-Tenant": {"globex"}, "Idempotency-Key": {"ev-globex-2"}}, []byte(`{"seat":"s2"}`))
	if st != 202 || !strings.Contains(string(b), `"globex/orders"`) || strings.Contains(string(b), "acme") {
		t.Fatalf("webhook_enqueue with tenant globex: %d %s", st, b)
	}
	st, _, b = post(t, f.g.URL+"/events", http.Header{"X-Event-Type": {"seat.released"}, "X-Tenant": {"no/such"}, "Idempotency-Key": {"ev-bad"}}, []byte(`{}`))
	if st != 400 || !strings.Contains(string(b), `"bad_tenant"`) {
		t.Fatalf("a tenant with a slash: %d %s", st, b)
	}
	st, _, b = post(t, f.g.Admin+"/hookgate/destinations/globex%2Forders/enqueue", http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"id":"ev-x","tenant":"acme","event_type":"seat.released","payload":{}}`))
	if st != 400 || !strings.Contains(string(b), `"bad_tenant"`) {
		t.Fatalf("acme's event enqueued to globex/orders: %d %s", st, b)
	}

	waitFor(t, "four dead letters", func() bool { return len(f.deadIDs(t, "")) == 4 })
	if got := f.deadIDs(t, "tenant=acme"); !slices.Equal(got, []string{"acme/billing:ev-acme-1", "acme/orders:ev-acme-1"}) {
		t.Fatalf("acme's dead letters: %v", got)
	}
	if got := f.deadIDs(t, "tenant=globex&destination=globex%2Forders"); len(got) != 2 {
		t.Fatalf("globex/orders's dead letters: %v", got)
	}
	if st := f.admin(t, "/hookgate/dlq?tenant=acme&destination=globex%2Forders", nil); st != 400 {
		t.Fatalf("acme's filter naming globex's destination: %d", st)
	}
	var one struct {
		Status struct{ Name, Tenant, Source string }
	}
	if st := f.admin(t, "/hookgate/destinations/acme%2Forders", &one); st != 200 || one.Status.Tenant != "acme" || one.Status.Source != "caddyfile" {
		t.Fatalf("GET acme/orders: %d %+v", st, one)
	}
	out, err := cli(t, f.g, "destinations", "list", "--tenant", "globex")
	if err != nil || !strings.Contains(out, "globex/orders") || strings.Contains(out, "acme") {
		t.Fatalf("destinations list --tenant globex: %v\n%s", err, out)
	}
	out, err = cli(t, f.g, "deliveries", "list", "--tenant", "acme")
	if err != nil || !strings.Contains(out, "acme/billing") || strings.Contains(out, "globex") {
		t.Fatalf("deliveries list --tenant acme: %v\n%s", err, out)
	}
	out, err = cli(t, f.g, "dlq", "redrive", "--tenant", "globex", "--limit", "10", "--dry-run")
	if err != nil || !strings.Contains(out, "2") {
		t.Fatalf("dlq redrive --tenant globex --dry-run: %v\n%s", err, out)
	}
}

// portalToken is the token of a link printed by hookgate portal-link.
func portalToken(t *testing.T, out string) (string, string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^(http\S+\?token=(\S+))$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no link printed:\n%s", out)
	}
	tok, _ := url.QueryUnescape(m[2])
	return m[1], tok
}

// TestPortal: a link from hookgate portal-link, followed from another
// site in Chromium, opens acme's console with no other login: acme's
// destinations and dead letters only; its replay button delivers.
// Then, as an attacker holding acme's session: globex's dead letters,
// deliveries, redrives and destinations are unreachable by ID, path or
// filter; a forged, an expired and a revoked link are 403, as is no
// session at all.
func TestPortal(t *testing.T) {
	f := newTenantsFixture(t)
	f.publish(t, "ev-acme-1", "acme")
	f.publish(t, "ev-acme-2", "acme")
	f.publish(t, "ev-globex-1", "globex")
	waitFor(t, "five dead letters", func() bool { return len(f.deadIDs(t, "")) == 5 })
	// The operator redrives globex's: its record is globex's.
	out, err := cli(t, f.g, "dlq", "redrive", "--tenant", "globex", "--limit", "1", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var globexRedrive struct {
		ID string `json:"redrive_id"`
	}
	_ = json.Unmarshal([]byte(out), &globexRedrive)
	waitFor(t, "globex's letter dead again", func() bool { return len(f.deadIDs(t, "tenant=globex")) == 1 })

	if out, err := cli(t, f.g, "portal-link", "--tenant", "initech"); err == nil || !strings.Contains(out, "unknown_tenant") {
		t.Fatalf("a link for a tenant with no destination: %v\n%s", err, out)
	}
	out, err = cli(t, f.g, "portal-link", "--tenant", "acme", "--ttl", "1h")
	if err != nil {
		t.Fatalf("portal-link: %v\n%s", err, out)
	}
	link, token := portalToken(t, out)
	if !strings.HasPrefix(link, f.portal+"?token=") {
		t.Fatalf("link %s, want one to %s", link, f.portal)
	}

	// Followed from another site (localhost is another site than
	// 127.0.0.1): the SameSite=Strict session must hold all the same.
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, `<!doctype html><a id="go" href="%s">your webhooks</a>`, strings.ReplaceAll(link, "&", "&amp;"))
	}))
	t.Cleanup(elsewhere.Close)
	mail := strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)
	ctx := browser(t)
	run(t, ctx, chromedp.Navigate(mail), chromedp.Click(chromedp.CSS("#go")), chromedp.WaitVisible(chromedp.CSS("#summary")))
	if loc := value(t, ctx, chromedp.Location()); strings.Contains(loc, "token") || loc != f.portal {
		t.Fatalf("the portal is at %s, want %s without its token", loc, f.portal)
	}
	if s := text(t, ctx, "#scope"); s != "tenant acme" {
		t.Fatalf("scope %q", s)
	}
	dests := eval[[]string](t, ctx, `[...document.querySelectorAll("#summary tbody tr, #health tbody tr")].map(tr => tr.dataset.destination)`)
	for _, d := range dests {
		if !strings.HasPrefix(d, "acme/") {
			t.Fatalf("acme's portal shows %q: %v", d, dests)
		}
	}
	if text(t, ctx, "#total") != "4" {
		t.Fatalf("acme's portal counts %s dead letters, want 4", text(t, ctx, "#total"))
	}
	screenshot(t, ctx, "portal")

	// The customer replays a dead letter.
	f.healthy.Store(true)
	run(t, ctx, chromedp.Navigate(f.portal+"dead/ev-acme-1?destination=acme%2Forders"), chromedp.WaitVisible(chromedp.CSS("#replay")))
	screenshot(t, ctx, "portal-detail")
	run(t, ctx, chromedp.Click(chromedp.CSS("#replay button")))
	waitDone(t, ctx)
	if got := f.deadIDs(t, "tenant=acme"); slices.Contains(got, "acme/orders:ev-acme-1") {
		t.Fatalf("ev-acme-1 still dead after the replay: %v", got)
	}
	screenshot(t, ctx, "portal-replayed")

	// The attacker's view: acme's session, a hand-made client.
	jar, _ := cookiejar.New(nil)
	base, _ := url.Parse(f.portal)
	jar.SetCookies(base, []*http.Cookie{{Name: portal.Cookie, Value: token}})
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, f.portal+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, page := do("GET", "dead", nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in acme's list:\n%s", page)
	}
	csrf := m[1]
	for _, tc := range []struct {
		method, path string
		form         url.Values
		want         int
	}{
		{"GET", "dead?destination=globex%2Forders", nil, 400},
		{"GET", "dead/ev-globex-1?destination=globex%2Forders", nil, 404},
		{"POST", "dead/ev-globex-1/replay", url.Values{"csrf": {csrf}, "destination": {"globex/orders"}}, 404},
		{"POST", "redrive", url.Values{"csrf": {csrf}, "destination": {"globex/orders"}, "limit": {"10"}}, 400},
		{"GET", "deliveries?destination=globex%2Forders", nil, 404},
		{"GET", "deliveries/ev-globex-1?destination=globex%2Forders", nil, 404},
		{"GET", "redrives/" + url.PathEscape(globexRedrive.ID), nil, 404},
		{"POST", "destinations/globex%2Forders/pause", url.Values{"csrf": {csrf}}, 404},
	} {
		st, body := do(tc.method, tc.path, tc.form)
		if st != tc.want || strings.Contains(body, "ev-globex") {
			t.Errorf("%s %s as acme: %d, want %d, and nothing of globex's:\n%.300s", tc.method, tc.path, st, tc.want, body)
		}
	}
	// A redrive of "everything" from acme's portal is acme's alone.
	_, page = do("POST", "redrive", url.Values{"csrf": {csrf}, "limit": {"10"}})
	if !strings.Contains(page, `id="matched">3<`) || !strings.Contains(page, "every destination of tenant <b>acme</b>") {
		t.Fatalf("acme's preview of a redrive of all, want its 3:\n%s", page)
	}
	once := regexp.MustCompile(`name="once" value="([^"]+)"`).FindStringSubmatch(page)
	if once == nil {
		t.Fatalf("no one-time token in acme's preview:\n%s", page)
	}
	if st, body := do("POST", "redrive", url.Values{"csrf": {csrf}, "limit": {"10"}, "confirm": {"yes"}, "once": {once[1]}}); st != 303 {
		t.Fatalf("acme's redrive: %d %s", st, body)
	}
	waitFor(t, "acme's dead letters delivered", func() bool { return len(f.deadIDs(t, "tenant=acme")) == 0 })
	if got := f.deadIDs(t, "tenant=globex"); len(got) != 1 {
		t.Fatalf("globex's dead letters after acme's redrive of all: %v", got)
	}

	// Links that are not good: forged, expired, none.
	expired := pastToken(t, "acme")
	forged := strings.Replace(token, ".", ".A", 1)
	for _, tc := range []struct{ name, q, reason string }{
		{"forged", "?token=" + url.QueryEscape(forged), "portal_link_invalid"},
		{"expired", "?token=" + url.QueryEscape(expired), "portal_link_expired"},
		{"no session", "", "portal_session_missing"},
	} {
		resp, err := http.Get(f.portal + tc.q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), tc.reason) || len(resp.Cookies()) != 0 {
			t.Errorf("%s: %d %s, cookies %v", tc.name, resp.StatusCode, b, resp.Cookies())
		}
	}

	// Revoked: the open session ends at its next request.
	if out, err := cli(t, f.g, "portal-link", "--tenant", "acme", "--revoke"); err != nil {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	run(t, ctx, chromedp.Navigate(f.portal), chromedp.WaitVisible(chromedp.CSS("#reason")))
	if r := text(t, ctx, "#reason"); r != "portal_link_revoked" {
		t.Fatalf("the session after the revocation: %s", r)
	}
	screenshot(t, ctx, "portal-revoked")
	if st, _ := do("GET", "dead", nil); st != 403 {
		t.Fatalf("acme's revoked session: %d", st)
	}
	out, _ = cli(t, f.g, "portal-link", "--tenant", "acme")
	_, fresh := portalToken(t, out)
	jar.SetCookies(base, []*http.Cookie{{Name: portal.Cookie, Value: fresh}})
	if st, _ := do("GET", "dead", nil); st != 200 {
		t.Fatalf("a link issued after the revocation: %d", st)
	}
}

// pastToken signs, under the tests' portal key, a link of tenant's that
// expired an hour ago.
func pastToken(t *testing.T, tenant string) string {
	t.Helper()
	s, err := boltstore.New(bolttest.Open(t, nil), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := portal.New(portalKey, "http://x.example/", s, func() time.Time { return time.Now().Add(-2 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	link, err := l.Issue(t.Context(), tenant, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link.URL)
	return u.Query().Get("token")
}

// TestPortalOnTwoInstances: two gateways on one Redis: a link issued by
// one opens the portal on the other, scoped alike; a revocation on the
// other ends the session the first one serves.
func TestPortalOnTwoInstances(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(400) })
	portA, portB := freePort(t), freePort(t)
	global := fmt.Sprintf(`hookgate {
		store redis %s
		key_prefix %s
		portal_key %s
		portal_url http://127.0.0.1:%d/portal/
		sender {
			attempts 1
		}
		destination orders {
			tenant acme
			url %s/acme
			secret %s
			events seat.*
		}
		destination orders {
			tenant globex
			url %s/globex
			secret %s
			events seat.*
		}
	}`, srv.URL(), redistest.Prefix("portal"), portalKey, portA, up.URL, devSecret, up.URL, devSecret)
	site := "handle_path /portal/* {\n\t\twebhook_console {\n\t\t\tportal\n\t\t}\n\t}"
	a := startGateway(t, site, gatewayOptions{Global: global, Port: portA})
	b := startGateway(t, site, gatewayOptions{Global: global, Port: portB})
	for _, tenant := range []string{"acme", "globex"} {
		body := fmt.Sprintf(`{"id":"ev-%s","event_type":"seat.released","tenant":"%s","payload":{}}`, tenant, tenant)
		if st, _, out := post(t, a.Admin+"/hookgate/events", http.Header{"Content-Type": {"application/json"}}, []byte(body)); st != 202 {
			t.Fatalf("publish: %d %s", st, out)
		}
	}
	waitFor(t, "two dead letters", func() bool {
		var s struct{ Total int }
		return getJSON(t, a.Admin+"/hookgate/dlq/summary", &s) == 200 && s.Total == 2
	})
	out, err := cli(t, a, "portal-link", "--tenant", "acme")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	_, token := portalToken(t, out)
	get := func(g *gateway, path, tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", g.URL+"/portal/"+path, nil)
		req.AddCookie(&http.Cookie{Name: portal.Cookie, Value: tok})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, g := range []*gateway{a, b} {
		st, page := get(g, "dead", token)
		if st != 200 || !strings.Contains(page, "ev-acme") || strings.Contains(page, "ev-globex") {
			t.Fatalf("acme's session on %s: %d\n%s", g.URL, st, page)
		}
	}
	if out, err := cli(t, b, "portal-link", "--tenant", "acme", "--revoke"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if st, page := get(a, "dead", token); st != 403 || !strings.Contains(page, "portal_link_revoked") {
		t.Fatalf("the session on the other instance after the revocation: %d %s", st, page)
	}
	out, _ = cli(t, b, "portal-link", "--tenant", "acme")
	_, fresh := portalToken(t, out)
	if st, _ := get(a, "dead", fresh); st != 200 {
		t.Fatalf("a link issued after the revocation, on the other instance: %d", st)
	}
}
