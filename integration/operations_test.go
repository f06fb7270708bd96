package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// reload loads caddyfile into g and fails the test unless Caddy took it.
func reload(t *testing.T, g *gateway, caddyfile string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.Admin+"/load", strings.NewReader(caddyfile))
	req.Header.Set("Content-Type", "text/caddyfile")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != 200 {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body) // what could be read: the status fails the test anyway
		t.Fatalf("reload: %s %s", resp.Status, b.String())
	}
}

// destinationsOf reads GET /hookgate/destinations.
func destinationsOf(t *testing.T, g *gateway) map[string]map[string]any {
	t.Helper()
	resp, err := http.Get(g.Admin + "/hookgate/destinations")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct{ Destinations []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, d := range v.Destinations {
		out[d["name"].(string)] = d
	}
	return out
}

// TestRenamedDestinationIsFoundAndMoved: three events queued (the
// destination paused) and one dead letter of "enrollment"; the config is
// reloaded with it renamed "enrollments". The old name is warned about,
// listed as orphaned with its depth (and in the depth gauge), its dead
// letter stays readable, nothing of it is delivered; `hookgate
// destinations move` sends all four to the new name, IDs and attempt log
// kept, and the three queued ones are delivered. Purge refuses a
// configured destination and clears the emptied old name.
func TestRenamedDestinationIsFoundAndMoved(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		store := storeOf(global)
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			if strings.HasPrefix(r.Header.Get("Webhook-Id"), "dead-") {
				w.WriteHeader(400)
				_, _ = w.Write([]byte("no such reservation"))
			}
		})
		destination := func(name string) string {
			return fmt.Sprintf("destination %s {\n\t\t\turl http://%s\n\t\t\tsecret %s\n\t\t}", name, up.Addr(), devSecret)
		}
		globalWith := func(dests ...string) string {
			return fmt.Sprintf("hookgate {\n\t\t%s\n\t\tsender {\n\t\t\tbackoff 20ms 200ms\n\t\t\ttimeout 1s\n\t\t}\n\t\t%s\n\t}", store, strings.Join(dests, "\n\t\t"))
		}
		g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: globalWith(destination("enrollment"))})
		if st, _, got := post(t, g.URL, http.Header{"Idempotency-Key": {"dead-1"}}, []byte(`{"n":0}`)); st != 202 {
			t.Fatalf("enqueue: %d %s", st, got)
		}
		waitFor(t, "the dead letter", func() bool {
			d := destinationsOf(t, g)["enrollment"]
			return d != nil && d["depth"].(map[string]any)["dead"] == float64(1)
		})
		if out, err := cli(t, g, "destinations", "pause", "enrollment"); err != nil {
			t.Fatalf("pause: %v %s", err, out)
		}
		for i := range 3 {
			if st, _, got := post(t, g.URL, http.Header{"Idempotency-Key": {fmt.Sprint("evt-", i)}}, fmt.Appendf(nil, `{"n":%d}`, i)); st != 202 {
				t.Fatalf("enqueue: %d %s", st, got)
			}
		}

		caddyfile, err := os.ReadFile(g.Config)
		if err != nil {
			t.Fatal(err)
		}
		renamed := strings.NewReplacer("destination enrollment {", "destination enrollments {",
			"webhook_enqueue enrollment", "webhook_enqueue enrollments").Replace(string(caddyfile))
		reload(t, g, renamed)

		waitFor(t, "the warning", func() bool {
			return strings.Contains(g.logs.String(), "does not name (renamed or removed?)") && strings.Contains(g.logs.String(), `"destination":"enrollment"`)
		})
		ds := destinationsOf(t, g)
		old := ds["enrollment"]
		if old == nil || old["state"] != "orphaned" || old["depth"].(map[string]any)["queued"] != float64(3) || old["depth"].(map[string]any)["dead"] != float64(1) {
			t.Fatalf("the old name after the rename: %v; want orphaned, 3 queued, 1 dead", old)
		}
		if _, ok := old["breaker"]; ok {
			t.Errorf("an orphan shows a breaker: %v", old)
		}
		if ds["enrollments"] == nil || ds["enrollments"]["state"] != "active" {
			t.Fatalf("the new name: %v", ds["enrollments"])
		}
		if m := g.Metrics(); !strings.Contains(m, `hookgate_sender_queue_depth{destination="enrollment",state="queued"} 3`) {
			t.Errorf("the depth gauge lacks the orphan:\n%s", grepLines(m, "hookgate_sender_queue_depth"))
		}
		out, err := cli(t, g, "dlq", "list", "--destination", "enrollment")
		if err != nil || !strings.Contains(out, "dead-1") {
			t.Errorf("the orphan's dead letters are not readable: %v\n%s", err, out)
		}
		if out, err := cli(t, g, "dlq", "redrive", "--destination", "enrollment", "--limit", "5"); err == nil || !strings.Contains(out, "move its letters") {
			t.Errorf("a redrive of an orphan: %v\n%s; want refused, naming the move", err, out)
		}
		time.Sleep(300 * time.Millisecond)
		if n := up.count(); n != 1 {
			t.Fatalf("the receiver got %d requests; want 1 (the dead letter's attempt): nothing of an orphan is delivered", n)
		}

		if out, err := cli(t, g, "destinations", "purge", "enrollments"); err == nil || !strings.Contains(out, "destination_configured") {
			t.Errorf("purge of a configured destination: %v\n%s; want 409 destination_configured", err, out)
		}
		out, err = cli(t, g, "destinations", "move", "enrollment", "enrollments")
		if err != nil || !strings.Contains(out, "moved 4 from enrollment to enrollments") {
			t.Fatalf("move: %v\n%s", err, out)
		}
		waitFor(t, "the three moved events", func() bool { return up.count() == 4 })
		if _, ok := destinationsOf(t, g)["enrollment"]; ok {
			t.Errorf("the old name is still listed after the move")
		}
		out, err = cli(t, g, "dlq", "show", "dead-1", "--format", "json")
		if err != nil || !strings.Contains(out, `"destination": "enrollments"`) || !strings.Contains(out, "no such reservation") {
			t.Errorf("the moved dead letter: %v\n%s; want it under enrollments with its attempt log", err, out)
		}

		// The moved-away name holds nothing now but its pause: purge
		// clears it; a name the store never held is refused.
		out, err = cli(t, g, "destinations", "purge", "enrollment")
		if err != nil || !strings.Contains(out, "0 envelopes removed") {
			t.Errorf("purge of the emptied orphan: %v\n%s", err, out)
		}
		if out, err := cli(t, g, "destinations", "purge", "never-was"); err == nil || !strings.Contains(out, "holds nothing") {
			t.Errorf("purge of a name the store holds nothing of: %v\n%s", err, out)
		}
	})
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
