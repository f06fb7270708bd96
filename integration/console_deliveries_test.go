package integration

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// deliveryRow is a delivery ID and its destination in a Deliveries page.
var deliveryRow = regexp.MustCompile(`<tr data-id="([^"]+)" data-destination="([^"]+)"`)

// TestConsoleDeliveries drives the console's Deliveries page in headless
// Chromium, over the fixture's 30 dead letters and 4 envelopes delivered
// since: the chart counts the last hour by outcome, the list is newest
// first, a search by entity finds one envelope, a delivered envelope's
// detail shows its attempt and its payload (kept for history_payload,
// 24h by default), and it is resent through the preview and the
// confirm: the receiver gets it a second time, under its own ID; a dead
// one resent is delivered once. A scoped console's page holds only its
// destination.
func TestConsoleDeliveries(t *testing.T) {
	f := newConsoleFixture(t)
	ctx := browser(t)
	base := f.g.URL + "/console"
	f.healthy.Store(true)
	for i := range 4 {
		id := fmt.Sprintf("a-ok-%02d", i)
		body := fmt.Sprintf(`{"id":%q,"event_type":"seat.released","entity":"r-%s","payload":{"seat":%d}}`, id, id, i)
		if st, _, got := post(t, f.g.Admin+"/hookgate/destinations/a/enqueue", nil, []byte(body)); st != 202 {
			t.Fatalf("enqueue %s: %d %s", id, st, got)
		}
	}
	// Wait until the four are in the history.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, page := send(t, "GET", base+"/deliveries?state=delivered", http.Header{"Accept": {"text/html"}}, nil)
		if len(deliveryRow.FindAllSubmatch(page, -1)) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("four deliveries never showed in the history:\n%s", page)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The page: the chart of the last hour, and the history newest first.
	run(t, ctx, chromedp.Navigate(base+"/"), chromedp.Click(chromedp.CSS(`header nav a[href$="/deliveries"]`)),
		chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	if d, x := text(t, ctx, "#chart-delivered"), text(t, ctx, "#chart-dead"); d != "4" || x != "30" {
		t.Fatalf("chart: %s delivered, %s dead; want 4, 30", d, x)
	}
	bars := eval[int](t, ctx, `document.querySelectorAll("#chart rect.bar").length`)
	first := eval[[]string](t, ctx, `[...document.querySelectorAll("#deliveries tbody tr")].slice(0, 4).map(tr => tr.dataset.id).sort()`)
	if bars < 2 || fmt.Sprint(first) != "[a-ok-00 a-ok-01 a-ok-02 a-ok-03]" {
		t.Fatalf("%d bars; the newest four are %v, want the four delivered last", bars, first)
	}
	screenshot(t, ctx, "deliveries")

	// A search by entity (the page it loads renders the value as an
	// attribute; the page typed on has it as a property only).
	run(t, ctx, chromedp.SetValue(chromedp.CSS(`#search input[name="entity"]`), "r-a-4xx-03"),
		chromedp.Click(chromedp.CSS(`#search button`)), chromedp.WaitVisible(chromedp.CSS(`#search input[name="entity"][value="r-a-4xx-03"]`)))
	found := eval[[]string](t, ctx, `[...document.querySelectorAll("#deliveries tbody tr")].map(tr => tr.dataset.id + " " + tr.querySelector(".state").textContent)`)
	if fmt.Sprint(found) != "[a-4xx-03 dead]" {
		t.Fatalf("search by entity r-a-4xx-03: %v", found)
	}

	// A delivered envelope's detail: its one attempt, its payload.
	run(t, ctx, chromedp.Navigate(base+"/deliveries?id=a-ok-01"), chromedp.WaitVisible(chromedp.CSS("#deliveries")),
		chromedp.Click(chromedp.CSS(`#deliveries tr[data-id="a-ok-01"] a`)), chromedp.WaitVisible(chromedp.CSS("#attempts")))
	attempts := eval[[]string](t, ctx, `[...document.querySelectorAll("#attempts tbody tr")].map(tr => tr.children[2].textContent)`)
	if s, p := text(t, ctx, "#state"), text(t, ctx, "#payload"); s != "delivered" || fmt.Sprint(attempts) != "[200]" || !strings.Contains(p, `"seat": 1`) {
		t.Fatalf("a-ok-01: state %s, attempts %v, payload %q", s, attempts, p)
	}
	screenshot(t, ctx, "delivery")

	// Resent: previewed, confirmed, and received a second time.
	run(t, ctx, chromedp.Click(chromedp.CSS("#resend button")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if m, mv := text(t, ctx, "#matched"), text(t, ctx, "#moves"); m != "1" || mv != "1" {
		t.Fatalf("resend preview: %s match, %s move; want 1, 1", m, mv)
	}
	if n := f.appliedCount("a-ok-01"); n != 1 {
		t.Fatalf("the preview sent something: a-ok-01 applied %d times", n)
	}
	screenshot(t, ctx, "resend")
	run(t, ctx, chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#redrive-id")))
	waitDone(t, ctx)
	if h, d := text(t, ctx, "h1"), text(t, ctx, "#delivered"); !strings.HasPrefix(h, "Resend rd_") || d != "1" {
		t.Fatalf("the resend's outcome: %q, delivered %s", h, d)
	}
	if n := f.appliedCount("a-ok-01"); n != 2 {
		t.Fatalf("a-ok-01 received %d times after its resend, want 2", n)
	}

	// A dead one, resent: delivered once.
	run(t, ctx, chromedp.Navigate(base+"/deliveries/a-4xx-03?destination=a"), chromedp.WaitVisible(chromedp.CSS("#resend")),
		chromedp.Click(chromedp.CSS("#resend button")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if f.deadTotal(t) != 30 || f.appliedCount("a-4xx-03") != 0 {
		t.Fatal("the preview moved something")
	}
	run(t, ctx, chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#redrive-id")))
	waitDone(t, ctx)
	if n := f.appliedCount("a-4xx-03"); n != 1 || f.deadTotal(t) != 29 || text(t, ctx, "#delivered") != "1" {
		t.Fatalf("a-4xx-03 applied %d times, %d dead left; want 1, 29", n, f.deadTotal(t))
	}
	run(t, ctx, chromedp.Navigate(base+"/deliveries?id=a-4xx-03"), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
	if s := text(t, ctx, `#deliveries tr[data-id="a-4xx-03"] .state`); s != "delivered" {
		t.Fatalf("a-4xx-03 after its resend: %s, want delivered", s)
	}

	// A subscriber's page: its own history alone.
	auth := http.Header{"Accept": {"text/html"}, "Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("a:pw-a"))}}
	st, _, page := send(t, "GET", f.g.URL+"/my/deliveries?destination=b", auth, nil)
	rows := deliveryRow.FindAllSubmatch(page, -1)
	if st != 200 || len(rows) != 19 { // a's 15 dead letters (one resent since) and 4 deliveries
		t.Fatalf("a's history: %d, %d rows, want 19", st, len(rows))
	}
	for _, r := range rows {
		if string(r[2]) != "a" {
			t.Fatalf("a's history lists %s of %s", r[1], r[2])
		}
	}
	if st, _, _ := send(t, "GET", f.g.URL+"/my/deliveries/b-4xx-00?destination=b", auth, nil); st != 404 {
		t.Fatalf("a's console on b's delivery: %d, want 404", st)
	}
}
