package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The delivery history (issue 19), end to end: GET /hookgate/deliveries,
// one delivery, resend, and `hookgate deliveries export`.

// historyEntry is an entry of GET /hookgate/deliveries.
type historyEntry struct {
	ID          string    `json:"id"`
	Destination string    `json:"destination"`
	EventType   string    `json:"event_type"`
	Entity      string    `json:"entity"`
	State       string    `json:"state"`
	Attempts    int       `json:"attempts"`
	CreatedAt   time.Time `json:"created_at"`
	SettledAt   time.Time `json:"settled_at"`
	LastStatus  int       `json:"last_status"`
}

// historyWalk pages through GET /hookgate/deliveries?query with limit,
// calling between after each page; it checks each page is newest first.
func historyWalk(t *testing.T, g *gateway, query string, limit int, between func()) []historyEntry {
	t.Helper()
	var all []historyEntry
	cursor := ""
	for range 10000 {
		st, _, body := send(t, "GET", g.Admin+"/hookgate/deliveries?"+query+"&limit="+fmt.Sprint(limit)+"&cursor="+url.QueryEscape(cursor), nil, nil)
		if st != 200 {
			t.Fatalf("GET /hookgate/deliveries?%s: %d %s", query, st, body)
		}
		var page struct {
			Entries []historyEntry `json:"entries"`
			Next    string         `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Entries) > limit {
			t.Fatalf("a page of %d, over the limit %d", len(page.Entries), limit)
		}
		all = append(all, page.Entries...)
		if page.Next == "" {
			break
		}
		cursor = page.Next
		if between != nil {
			between()
		}
	}
	for i := 1; i < len(all); i++ {
		if all[i].SettledAt.After(all[i-1].SettledAt) {
			t.Fatalf("%s: %s/%s settled %s, after the entry before it (%s): not newest first", query, all[i].Destination, all[i].ID, all[i].SettledAt, all[i-1].SettledAt)
		}
	}
	return all
}

// keys are the entries' destination/id, in order.
func keys(entries []historyEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Destination+"/"+e.ID)
	}
	return out
}

// TestDeliveryHistory: events fanned out to three destinations settle
// (delivered, and dead for one destination's refusals) while the history
// is paged; each walk lists every entry at most once, newest first, and
// once all settled the filters narrow it; one delivery is shown with its
// payload and attempts; the gauge counts the entries. On both stores.
func TestDeliveryHistory(t *testing.T) {
	backends(t, testDeliveryHistory)
}

func testDeliveryHistory(t *testing.T, global string) {
	var mu sync.Mutex
	got := map[string]int{}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		mu.Lock()
		got[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/b" && strings.HasSuffix(r.Header.Get("Webhook-Id"), "7") {
			w.WriteHeader(http.StatusBadRequest) // permanent: dead at once
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	global = fanGlobal(storeOf(global), "attempts 2\n\t\t\tbackoff 10ms 20ms\n\t\t\thistory 1h\n\t\t\thistory_payload 1h",
		fanDest("a", up.URL+"/a", "*"), fanDest("b", up.URL+"/b", "reservation.*"), fanDest("c", up.URL+"/c", "seat.*"))
	g := startGateway(t, fanSite, gatewayOptions{Global: global})

	const n = 60
	types := func(i int) string {
		if i%3 == 0 {
			return "seat.released"
		}
		return "reservation.confirmed"
	}
	const want = 2 * n // envelopes: a gets every event, b the reservations, c the seats
	var pub sync.WaitGroup
	pub.Go(func() {
		for i := range n {
			body := fmt.Sprintf(`{"type":%q,"reservation_id":"r-%d"}`, types(i), i%5)
			if a := publish(t, g.URL+"/events/", fmt.Sprintf("h-%02d", i), body); a.Status != 202 {
				t.Errorf("publish %d: %d %s", i, a.Status, a.raw)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	// Walks while they settle: no entry twice, newest first.
	for range 3 {
		seen := map[string]bool{}
		for _, k := range keys(historyWalk(t, g, "", 7, func() { time.Sleep(20 * time.Millisecond) })) {
			if seen[k] {
				t.Fatalf("a walk while envelopes settle lists %s twice", k)
			}
			seen[k] = true
		}
	}
	pub.Wait()

	var all []historyEntry
	deadline := time.Now().Add(30 * time.Second)
	for {
		all = historyWalk(t, g, "", 50, nil)
		if len(all) == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(all) != want {
		t.Fatalf("the history holds %d entries, want %d", len(all), want)
	}
	if diff := slices.Compact(slices.Sorted(slices.Values(keys(all)))); len(diff) != want {
		t.Fatalf("the history lists an entry twice")
	}
	count := func(query string) int { return len(historyWalk(t, g, query, 9, nil)) }
	deadB := 0
	for i := range n {
		if types(i) != "seat.released" && strings.HasSuffix(fmt.Sprintf("h-%02d", i), "7") {
			deadB++
		}
	}
	for query, want := range map[string]int{
		"destination=a":                 n,
		"destination=c":                 n / 3,
		"destination=b&state=dead":      deadB,
		"state=dead":                    deadB,
		"destination=b&state=delivered": 2*n/3 - deadB,
		"event_type=seat.released":      2 * n / 3,
		"entity=r-1":                    2 * n / 5,
		"id=h-03":                       2,
		"id=h-04&destination=c":         0,
		"until=" + url.QueryEscape(all[len(all)-1].SettledAt.Format(time.RFC3339Nano)): 0,
		"since=" + url.QueryEscape(all[len(all)-1].SettledAt.Format(time.RFC3339Nano)): want,
	} {
		if got := count(query); got != want {
			t.Errorf("%s: %d entries, want %d", query, got, want)
		}
	}
	for _, e := range historyWalk(t, g, "destination=b&state=dead", 50, nil) {
		if e.LastStatus != 400 || e.Attempts != 1 || e.EventType != "reservation.confirmed" {
			t.Errorf("a dead entry: %+v", e)
		}
	}

	out, err := cli(t, g, "deliveries", "show", "a", "h-03")
	if err != nil || !strings.Contains(out, `"state": "delivered"`) || !strings.Contains(out, `"reservation_id": "r-3"`) ||
		!strings.Contains(out, `"attempt_log": [`) || strings.Contains(out, "payload_expired") {
		t.Fatalf("deliveries show: %v\n%s", err, out)
	}
	out, err = cli(t, g, "deliveries", "list", "--destination", "c", "--limit", "3")
	if err != nil || strings.Count(out, "\n") != 5 || !strings.Contains(out, "more: --cursor") {
		t.Errorf("deliveries list: %v\n%s", err, out)
	}
	if out, err := cli(t, g, "deliveries", "list", "--destination", "nowhere"); err == nil || !strings.Contains(out, "unknown_destination") {
		t.Errorf("an unknown destination: %v\n%s", err, out)
	}
	m := g.Metrics()
	for dest, want := range map[string]int{"a": n, "b": 2 * n / 3, "c": n / 3} {
		if line := fmt.Sprintf(`hookgate_sender_history_entries{destination=%q} %d`, dest, want); !strings.Contains(m, line) {
			t.Errorf("metrics lack %s:\n%s", line, grepLines(m, "hookgate_sender_history"))
		}
	}
}

// TestDeliveryPayloadExpires: with a short history_payload, a delivered
// envelope keeps its entry and loses its payload at its time, though
// nothing settles after it (issue 29: it was served until the next
// delivery); it is shown "payload_expired":true, and a resend matches it
// and sends nothing.
func TestDeliveryPayloadExpires(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: senderGlobal("store file", up.URL, "history 1h\n\t\t\thistory_payload 1s")})
	deliver := func(id string) {
		if st, _, body := post(t, g.URL, http.Header{"Idempotency-Key": {id}}, []byte(`{"n":"`+id+`"}`)); st != 202 {
			t.Fatalf("enqueue %s: %d %s", id, st, body)
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(historyWalk(t, g, "id="+id, 10, nil)) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%s never settled", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	deliver("px-1")
	if out, err := cli(t, g, "deliveries", "show", "enrollment", "px-1"); err != nil || !strings.Contains(out, `"n": "px-1"`) {
		t.Fatalf("before its time: %v\n%s", err, out)
	}
	time.Sleep(1500 * time.Millisecond) // the destination is quiet: nothing settles
	out, err := cli(t, g, "deliveries", "show", "enrollment", "px-1")
	if err != nil || !strings.Contains(out, `"payload": null`) || !strings.Contains(out, `"payload_expired": true`) || !strings.Contains(out, `"state": "delivered"`) {
		t.Fatalf("after its time: %v\n%s", err, out)
	}
	out, err = cli(t, g, "deliveries", "resend", "--id", "px-1", "--limit", "5", "--format", "json")
	if err != nil || !strings.Contains(out, `"matched": 1`) || !strings.Contains(out, `"moved": 0`) {
		t.Errorf("a resend of an expired payload: %v\n%s", err, out)
	}
	if up.count() != 1 {
		t.Errorf("the receiver got %d requests, want 1 (nothing resent)", up.count())
	}
}

// TestDeliveriesResendThroughDedupe: a receiver behind webhook_dedupe
// applied 20 events; it "lost" five of them (its dedupe forgets them, as
// after a restore from a backup). A dry run counts; a bounded resend sends
// its limit; a resend of the window sends all again under a new redrive
// ID, audited and followed: the receiver's dedupe replays the fifteen it
// remembers and forwards the five it forgot, so the upstream applies each
// of those once more and no other.
func TestDeliveriesResendThroughDedupe(t *testing.T) {
	var mu sync.Mutex
	applied := map[string]int{}
	redrives := map[string]string{}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		id := r.Header.Get("Webhook-Id")
		mu.Lock()
		applied[id]++
		redrives[id] = r.Header.Get("Hookgate-Redrive-Id")
		mu.Unlock()
		_, _ = w.Write([]byte(`{"applied":true}`))
	})
	recv := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})
	g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{Global: senderGlobal("store file", recv.URL, "")})
	start := time.Now().UTC().Add(-time.Second)
	for i := range 20 {
		if st, _, body := post(t, g.URL, http.Header{"Idempotency-Key": {fmt.Sprintf("rs-%02d", i)}}, fmt.Appendf(nil, `{"n":%d}`, i)); st != 202 {
			t.Fatalf("enqueue: %d %s", st, body)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(historyWalk(t, g, "state=delivered", 100, nil)) != 20 {
		if time.Now().After(deadline) {
			t.Fatal("20 deliveries never settled")
		}
		time.Sleep(50 * time.Millisecond)
	}
	end := time.Now().UTC().Add(time.Hour) // the resends settle in the window too
	for i := range 5 {
		if out, err := cli(t, recv, "dedupe", "forget", fmt.Sprintf("rs-%02d", i)); err != nil {
			t.Fatalf("dedupe forget: %v\n%s", err, out)
		}
	}
	window := []string{"--destination", "enrollment", "--state", "delivered", "--since", start.Format(time.RFC3339), "--until", end.Format(time.RFC3339)}

	out, err := cli(t, g, append([]string{"deliveries", "resend", "--dry-run"}, window...)...)
	if err != nil || !strings.Contains(out, "dry run: 20 deliveries match; nothing sent") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if out, err := cli(t, g, append([]string{"deliveries", "resend"}, window...)...); err == nil || !strings.Contains(out, "needs --limit") {
		t.Fatalf("a resend without --limit: %v\n%s", err, out)
	}
	if out, err := cli(t, g, append([]string{"deliveries", "resend", "--limit", "10001"}, window...)...); err == nil || !strings.Contains(out, "bad_limit") {
		t.Fatalf("a resend over max_redrive: %v\n%s", err, out)
	}
	// Bounded: the newest two.
	var rd struct {
		ID             string `json:"redrive_id"`
		Matched, Moved int
		More           bool // matched counts up to the limit
	}
	out, err = cli(t, g, append([]string{"deliveries", "resend", "--limit", "2", "--id", "rs-10", "--id", "rs-11", "--id", "rs-12", "--format", "json"}, window...)...)
	if err != nil || json.Unmarshal([]byte(out), &rd) != nil || rd.Matched != 2 || !rd.More || rd.Moved != 2 {
		t.Fatalf("a resend of 2 of 3: %v\n%s", err, out)
	}
	waitResent(t, g, rd.ID, 2)

	// The window, again: all of it.
	before := up.count()
	out, err = cli(t, g, append([]string{"deliveries", "resend", "--limit", "100", "--format", "json"}, window...)...)
	rd.More = true
	if err != nil || json.Unmarshal([]byte(out), &rd) != nil || rd.Matched != 20 || rd.More || rd.Moved != 20 || !strings.HasPrefix(rd.ID, "rd_") {
		t.Fatalf("a resend of the window: %v\n%s", err, out)
	}
	status := waitResent(t, g, rd.ID, 20)
	if !strings.Contains(status, `"kind": "resend"`) || !strings.Contains(status, `"by": "cli: `) || !strings.Contains(status, `"moved": 20`) {
		t.Errorf("the audit record lacks its kind, who or how many:\n%s", status)
	}
	if !strings.Contains(g.logs.String(), `"msg":"resend"`) {
		t.Errorf("no log line for the resend:\n%s", grepLines(g.logs.String(), "resend"))
	}
	mu.Lock()
	defer mu.Unlock()
	if got := up.count() - before; got != 5 {
		t.Errorf("the upstream got %d of the window's resends, want the 5 its dedupe forgot", got)
	}
	for i := range 20 {
		id := fmt.Sprintf("rs-%02d", i)
		want := 1
		if i < 5 {
			want = 2
		}
		if applied[id] != want {
			t.Errorf("%s applied %d times, want %d", id, applied[id], want)
		}
		if i < 5 && redrives[id] != rd.ID {
			t.Errorf("%s sent again with Hookgate-Redrive-Id %q, want %s", id, redrives[id], rd.ID)
		}
	}
}

// waitResent waits until the resend's progress counts want delivered, and
// returns its audit record.
func waitResent(t *testing.T, g *gateway, id string, want int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := cli(t, g, "deliveries", "resend", "--status", id)
		if strings.Contains(out, fmt.Sprintf(`"delivered": %d`, want)) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("resend %s never delivered %d:\n%s", id, want, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDeliveriesExport: 100,000 delivered envelopes (5,000 under -short),
// seeded into the embedded store before the gateway starts, are exported
// by `hookgate deliveries export` as JSON Lines: every one once, newest
// first. Its memory is measured by bench/history_export.sh, not here.
func TestDeliveriesExport(t *testing.T) {
	n := 100000
	if testing.Short() {
		n = 5000
	}
	data := t.TempDir()
	seed := exec.Command("go", "run", "../bench/histseed", "-db", filepath.Join(data, "caddy", "hookgate", "state.db"), "-n", fmt.Sprint(n))
	if out, err := seed.CombinedOutput(); err != nil {
		t.Fatalf("histseed: %v\n%s", err, out)
	}
	g := startGateway(t, "webhook_enqueue enrollment", gatewayOptions{DataDir: data, Global: senderGlobal("store file", "http://127.0.0.1:1", "")})
	cmd := exec.Command(binary, "deliveries", "export", "--address", g.Admin)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines, seen := 0, make([]bool, n)
	var prev time.Time
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var e historyEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d: %v: %s", lines+1, err, sc.Bytes())
		}
		var i int
		if _, err := fmt.Sscanf(e.ID, "hist-%06d", &i); err != nil || i < 0 || i >= n || seen[i] ||
			e.Destination != "enrollment" || e.State != "delivered" || e.LastStatus != 200 || e.Attempts != 1 {
			t.Fatalf("line %d: %+v: not a seeded delivery, or one listed twice", lines+1, e)
		}
		if lines > 0 && e.SettledAt.After(prev) {
			t.Fatalf("line %d: %s settled after the line before it: not newest first", lines+1, e.ID)
		}
		seen[i], prev = true, e.SettledAt
		lines++
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("export: %v", err)
	}
	if lines != n {
		t.Errorf("export wrote %d lines, want %d", lines, n)
	}
}
