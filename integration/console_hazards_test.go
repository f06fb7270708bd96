package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// consoleVariant starts a second gateway on the fixture's Redis whose
// global options are the fixture's changed by edit, and a browser.
func consoleVariant(t *testing.T, f *consoleFixture, edit func(string) string) (*gateway, context.Context) {
	global := edit(f.global)
	if global == f.global {
		t.Fatalf("the config did not change:\n%s", global)
	}
	return startGateway(t, f.site, gatewayOptions{Global: global}), browser(t)
}

// postFromPage sends a form from the page (same origin, the page's CSRF
// token) and returns the status and the problem's reason.
func postFromPage(t *testing.T, ctx context.Context, path string, fields map[string]string) string {
	t.Helper()
	var pairs []string
	for k, v := range fields {
		pairs = append(pairs, fmt.Sprintf("%q: %q", k, v))
	}
	js := fmt.Sprintf(`(() => { const b = new URLSearchParams({%s}); b.set("csrf", document.querySelector('input[name="csrf"]').value);
		return fetch(%q, {method: "POST", body: b}).then(r => r.json().then(p => r.status + " " + p.reason)); })()`,
		strings.Join(pairs, ", "), path)
	return value(t, ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
}

// TestConsoleSenderBound: under a sender bounded by max_redrive 5, the
// console offers at most 5 and answers a larger hand-made redrive with
// 400 bad_limit (it was a 503 blaming the store); a console max_redrive
// over the sender's is a config error.
func TestConsoleSenderBound(t *testing.T) {
	f := newConsoleFixture(t)
	bound := func(global string) string {
		return strings.Replace(global, "sender {", "sender {\n\t\t\tmax_redrive 5", 1)
	}
	g, ctx := consoleVariant(t, f, bound)
	run(t, ctx, chromedp.Navigate(g.URL+"/console/dead?destination=a&class=http_4xx"), chromedp.WaitVisible(chromedp.CSS("#redrive")))
	if m := value(t, ctx, chromedp.AttributeValue(chromedp.CSS(`#redrive input[name="limit"]`), "max")).Value; m != "5" {
		t.Errorf("the redrive form offers up to %q, want the sender's 5", m)
	}
	if got := postFromPage(t, ctx, "/console/redrive", map[string]string{"destination": "a", "class": "http_4xx", "limit": "6"}); got != "400 bad_limit" {
		t.Errorf("a redrive of 6 under the sender's max_redrive 5: %s, want 400 bad_limit", got)
	}

	site := strings.Replace(f.site, "handle_path /console/* {\n\t\twebhook_console\n", "handle_path /console/* {\n\t\twebhook_console {\n\t\t\tmax_redrive 10\n\t\t}\n", 1)
	if site == f.site {
		t.Fatalf("the site did not change as meant:\n%s", site)
	}
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("{\n\tadmin off\n\t%s\n}\n\nhttp://127.0.0.1:%d {\n\t%s\n}\n", bound(f.global), freePort(t), site)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "validate", "--config", path, "--adapter", "caddyfile").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "max_redrive 10 is over the sender's max_redrive 5") {
		t.Errorf("validate with a console max_redrive over the sender's: %v\n%s", err, out)
	}
}

// TestConsoleOrphans: a gateway on the fixture's Redis without
// destination c, whose 5 dead letters are thereby orphaned, keeps them
// readable in its console, without a replay button or redrive form (or
// a pause button in the health table), and answers a hand-made replay or
// redrive of them with 409 destination_orphaned (the detail was a 404,
// the posts 503s).
func TestConsoleOrphans(t *testing.T) {
	f := newConsoleFixture(t)
	g, ctx := consoleVariant(t, f, func(global string) string {
		return regexp.MustCompile(`(?s)destination c \{.*?\}`).ReplaceAllString(global, "")
	})
	base := g.URL + "/console"
	run(t, ctx, chromedp.Navigate(base+"/dead/c-landed-00?destination=c"), chromedp.WaitVisible(chromedp.CSS("#delivery-id, #reason")))
	if r := eval[string](t, ctx, `document.querySelector("#reason")?.textContent ?? ""`); r != "" {
		t.Fatalf("an orphan's dead letter: refused with %s", r)
	}
	if !eval[bool](t, ctx, `!!document.querySelector("#orphaned") && !document.querySelector("#replay") && !!document.querySelector("#attempts")`) {
		t.Errorf("an orphan's dead letter: want its attempts, the orphan note, and no replay button")
	}
	run(t, ctx, chromedp.Navigate(base+"/dead?destination=c"), chromedp.WaitVisible(chromedp.CSS("#entries")))
	if n := eval[int](t, ctx, `document.querySelectorAll("#entries tbody tr").length`); n != 5 || !eval[bool](t, ctx, `!!document.querySelector("#orphaned") && !document.querySelector("#redrive")`) {
		t.Errorf("an orphan's list: %d entries; want 5, the orphan note, and no redrive form", n)
	}
	run(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#health")))
	if st, button := text(t, ctx, `#health tr[data-destination="c"] .state`), eval[bool](t, ctx, `!!document.querySelector('#health tr[data-destination="c"] button')`); st != "orphaned" || button {
		t.Errorf("c in the health table: %q, pause button %v; want orphaned, none", st, button)
	}
	for path, fields := range map[string]map[string]string{
		"/console/dead/c-landed-00/replay": {"destination": "c"},
		"/console/redrive":                 {"destination": "c", "limit": "1"},
	} {
		if got := postFromPage(t, ctx, path, fields); got != "409 destination_orphaned" {
			t.Errorf("POST %s of an orphan's letters: %s, want 409 destination_orphaned", path, got)
		}
	}
	var s struct{ Total int }
	f.adminGet(t, "/hookgate/dlq/summary?destination=c", &s)
	if s.Total != 5 {
		t.Errorf("c holds %d dead letters, want its 5 untouched", s.Total)
	}
}
