package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/verify"
)

// Fan-out by event type (issue 19), end to end: webhook_enqueue without a
// destination and POST /hookgate/events.

// fanSite is a site whose /events/* fans each event out by its JSON type.
const fanSite = `route /events/* {
		webhook_enqueue {
			event_type {webhook.json.type}
			entity {webhook.json.reservation_id}
		}
	}`

// fanSecret is the signing secret of destination name: each its own.
func fanSecret(name string) string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte("fan-out secret of "+name))
}

// fanDest is a destination block that subscribes to events (none: only
// enqueues that name it).
func fanDest(name, url string, events ...string) string {
	b := fmt.Sprintf("destination %s {\n\t\t\turl %s\n\t\t\tsecret %s", name, url, fanSecret(name))
	if len(events) > 0 {
		b += "\n\t\t\tevents " + strings.Join(events, " ")
	}
	return b + "\n\t\t}"
}

// fanGlobal is the hookgate option: store lines, sender lines, then the
// destination blocks.
func fanGlobal(store, sender string, dests ...string) string {
	return fmt.Sprintf("hookgate {\n\t\t%s\n\t\tsender {\n\t\t\t%s\n\t\t}\n\t\t%s\n\t}", store, sender, strings.Join(dests, "\n\t\t"))
}

// fanAnswer is a fan-out's answer: the 202 body, or a refusal's reason.
type fanAnswer struct {
	Status     int
	Reason     string
	ID         string `json:"id"`
	EventType  string `json:"event_type"`
	Deliveries []struct {
		Destination string `json:"destination"`
		State       string `json:"state"`
		Duplicate   bool   `json:"duplicate"`
	} `json:"deliveries"`
	raw []byte
}

// answerOf reads a 202 or a problem.
func answerOf(t *testing.T, st int, h http.Header, body []byte) fanAnswer {
	t.Helper()
	a := fanAnswer{Status: st, raw: body}
	if st == 202 {
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("a 202 answer %q: %v", body, err)
		}
		return a
	}
	a.Reason = problemBody(t, st, h, body)
	return a
}

// publish POSTs body to a fan-out webhook_enqueue under delivery ID id.
func publish(t *testing.T, url, id, body string) fanAnswer {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if id != "" {
		h.Set("Idempotency-Key", id)
	}
	st, hdr, got := post(t, url, h, []byte(body))
	return answerOf(t, st, hdr, got)
}

// publishAdmin POSTs the event to the admin API's /hookgate/events.
func publishAdmin(t *testing.T, g *gateway, id, eventType, payload string) fanAnswer {
	t.Helper()
	in := map[string]any{"id": id, "payload": json.RawMessage(payload)}
	if eventType != "" {
		in["event_type"] = eventType
	}
	b, _ := json.Marshal(in)
	st, hdr, got := post(t, g.Admin+"/hookgate/events", nil, b)
	return answerOf(t, st, hdr, got)
}

// routed is the destinations of a 202, in order, each with "dup" when a
// duplicate.
func (a fanAnswer) routed() []string {
	out := []string{}
	for _, d := range a.Deliveries {
		if d.Duplicate {
			out = append(out, d.Destination+" dup")
		} else {
			out = append(out, d.Destination)
		}
	}
	return out
}

// subscriber is a receiver of one destination: it checks each request's
// signature with the destination's secret and counts deliveries by ID.
type subscriber struct {
	*upstream
	name string
}

func newSubscriber(t *testing.T, name string, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *subscriber {
	return &subscriber{upstream: newUpstream(t, handle), name: name}
}

// byID counts the requests received by Webhook-Id, failing the test on
// one whose signature does not verify with the destination's secret.
func (s *subscriber) byID(t *testing.T) map[string]int {
	t.Helper()
	v := signer(t, "standard", fanSecret(s.name))
	out := map[string]int{}
	for _, r := range s.received() {
		if _, err := v.Verify(verify.Request{Header: r.Header, Body: r.Body}, time.Now()); err != nil {
			t.Errorf("%s got %s with a signature that does not verify with its secret: %v", s.name, r.Header.Get("Webhook-Id"), err)
		}
		out[r.Header.Get("Webhook-Id")]++
	}
	return out
}

// TestFanOutRoutesByGlob: events published once through webhook_enqueue
// without a destination reach exactly the destinations whose globs match
// their type, each signed with that destination's secret, byte for byte,
// once; a destination without events gets none.
func TestFanOutRoutesByGlob(t *testing.T) {
	subs := map[string]*subscriber{}
	var dests []string
	for _, d := range []struct {
		name   string
		events []string
	}{
		{"enrollment", []string{"reservation.*", "seat.released"}},
		{"billing", []string{"reservation.confirmed"}},
		{"audit", []string{"*"}},
		{"manual", nil},
	} {
		subs[d.name] = newSubscriber(t, d.name, nil)
		dests = append(dests, fanDest(d.name, subs[d.name].URL, d.events...))
	}
	g := startGateway(t, fanSite, gatewayOptions{Global: fanGlobal("store file", "backoff 50ms 500ms", dests...)})

	events := []struct{ id, typ string }{
		{"evt-1", "reservation.confirmed"},
		{"evt-2", "seat.released"},
		{"evt-3", "invoice.paid"},
		{"evt-4", "reservation.cancelled"},
		{"evt-5", "reservation"}, // reservation.* wants a dot
		{"evt-6", "seat.reserved"},
	}
	want := map[string][]string{
		"enrollment": {"evt-1", "evt-2", "evt-4"},
		"billing":    {"evt-1"},
		"audit":      {"evt-1", "evt-2", "evt-3", "evt-4", "evt-5", "evt-6"},
	}
	body := func(id, typ string) string {
		return fmt.Sprintf(`{"type":%q,"reservation_id":"r-%s"}`, typ, id)
	}
	for _, e := range events {
		a := publish(t, g.URL+"/events/", e.id, body(e.id, e.typ))
		var wantRouted []string
		for _, d := range []string{"enrollment", "billing", "audit"} {
			if slices.Contains(want[d], e.id) {
				wantRouted = append(wantRouted, d)
			}
		}
		if a.Status != 202 || a.ID != e.id || a.EventType != e.typ || !slices.Equal(a.routed(), wantRouted) {
			t.Errorf("%s (%s): %d %s; want 202 to %v", e.id, e.typ, a.Status, a.raw, wantRouted)
		}
	}
	waitFor(t, "every delivery", func() bool {
		for name, ids := range want {
			if subs[name].count() < len(ids) {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond) // room for a delivery too many
	for _, name := range []string{"enrollment", "billing", "audit", "manual"} {
		got := subs[name].byID(t)
		wantIDs := map[string]int{}
		for _, id := range want[name] {
			wantIDs[id] = 1
		}
		if diff := cmp.Diff(wantIDs, got); diff != "" {
			t.Errorf("%s received by ID (-want +got):\n%s", name, diff)
		}
		for _, r := range subs[name].received() {
			id := r.Header.Get("Webhook-Id")
			typ := ""
			for _, e := range events {
				if e.id == id {
					typ = e.typ
				}
			}
			if !bytes.Equal(r.Body, []byte(body(id, typ))) || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s got %s as %q (%s); want the body byte for byte, as application/json", name, id, r.Body, r.Header.Get("Content-Type"))
			}
		}
	}
}

// TestFanOutAnswers: the same ID again answers each delivery as a
// duplicate; another body under it is 422; an event without a type 400
// missing_event_type; an event no destination subscribes to is 202 with
// "deliveries":[] and counted as unrouted.
func TestFanOutAnswers(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, fanSite, gatewayOptions{Global: fanGlobal("store file", "backoff 50ms 500ms",
		fanDest("enrollment", up.URL, "reservation.*"), fanDest("manual", up.URL), fanDest("billing", up.URL, "reservation.confirmed"))})
	url := g.URL + "/events/"
	const body = `{"type":"reservation.confirmed","reservation_id":"r-1"}`

	first := publish(t, url, "evt-1", body)
	if first.Status != 202 || !slices.Equal(first.routed(), []string{"enrollment", "billing"}) || first.Deliveries[0].State != "queued" {
		t.Fatalf("first publish: %d %s", first.Status, first.raw)
	}
	again := publish(t, url, "evt-1", body)
	if again.Status != 202 || !slices.Equal(again.routed(), []string{"enrollment dup", "billing dup"}) {
		t.Errorf("the same event again: %d %s; want both deliveries duplicates", again.Status, again.raw)
	}
	for _, d := range again.Deliveries {
		if d.State != "queued" && d.State != "leased" && d.State != "delivered" {
			t.Errorf("the same event again: %s is %q", d.Destination, d.State)
		}
	}
	if a := publish(t, url, "evt-1", `{"type":"reservation.confirmed","reservation_id":"r-2"}`); a.Status != 422 || a.Reason != "key_reused_with_different_payload" {
		t.Errorf("the same ID, another body: %d %s", a.Status, a.raw)
	}
	if a := publish(t, url, "evt-2", `{"reservation_id":"r-1"}`); a.Status != 400 || a.Reason != "missing_event_type" {
		t.Errorf("no type: %d %s", a.Status, a.raw)
	}
	unrouted := publish(t, url, "evt-3", `{"type":"invoice.paid"}`)
	if unrouted.Status != 202 || !bytes.Contains(unrouted.raw, []byte(`"deliveries":[]`)) || unrouted.ID != "evt-3" || unrouted.EventType != "invoice.paid" {
		t.Errorf("no subscriber: %d %s; want 202 with \"deliveries\":[]", unrouted.Status, unrouted.raw)
	}
	waitFor(t, "both deliveries", func() bool { return up.count() >= 2 })
	time.Sleep(300 * time.Millisecond)
	if n := up.count(); n != 2 {
		t.Errorf("the subscribers got %d requests, want 2: evt-1 once each", n)
	}
	m := g.Metrics()
	for _, want := range []string{
		`hookgate_sender_enqueued_total{destination="",result="unrouted"} 1`,
		`hookgate_sender_enqueued_total{destination="enrollment",result="queued"} 1`,
		`hookgate_sender_enqueued_total{destination="enrollment",result="duplicate"} 1`,
		`hookgate_sender_enqueued_total{destination="billing",result="duplicate"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "hookgate_sender_enqueued"))
		}
	}
	if strings.Contains(m, `destination="manual",result="queued"} 1`) {
		t.Errorf("manual, subscribed to nothing, counts an enqueue:\n%s", grepLines(m, "hookgate_sender_enqueued"))
	}
}

// TestFanOutRetriesIndependently: one subscriber answers 500 three times,
// then 200; one answers 400; two answer 200. Each healthy one gets the
// event once, the flaky one is retried until it is delivered, and the one
// that refuses it dead-letters alone.
func TestFanOutRetriesIndependently(t *testing.T) {
	var mu sync.Mutex
	flakyAnswers := 0
	subs := map[string]*subscriber{
		"ok-1": newSubscriber(t, "ok-1", nil),
		"ok-2": newSubscriber(t, "ok-2", nil),
		"flaky": newSubscriber(t, "flaky", func(w http.ResponseWriter, r *http.Request, body []byte) {
			mu.Lock()
			defer mu.Unlock()
			if flakyAnswers++; flakyAnswers <= 3 {
				w.WriteHeader(500)
			}
		}),
		"broken": newSubscriber(t, "broken", func(w http.ResponseWriter, r *http.Request, body []byte) { w.WriteHeader(400) }),
	}
	var dests []string
	for _, name := range []string{"ok-1", "flaky", "broken", "ok-2"} {
		dests = append(dests, fanDest(name, subs[name].URL, "reservation.*"))
	}
	sender := "attempts 10\n\t\t\tbackoff 100ms 300ms\n\t\t\tbreaker {\n\t\t\t\tfailures 1000\n\t\t\t}"
	g := startGateway(t, fanSite, gatewayOptions{Global: fanGlobal("store file", sender, dests...)})
	if a := publish(t, g.URL+"/events/", "evt-1", `{"type":"reservation.confirmed"}`); a.Status != 202 || len(a.Deliveries) != 4 {
		t.Fatalf("publish: %d %s", a.Status, a.raw)
	}
	delivered := func(dest, outcome string) string {
		return fmt.Sprintf(`hookgate_sender_deliveries_total{destination=%q,outcome=%q} 1`, dest, outcome)
	}
	waitFor(t, "flaky delivered and broken dead", func() bool {
		m := g.Metrics()
		return strings.Contains(m, delivered("flaky", "delivered")) && strings.Contains(m, delivered("broken", "dead"))
	})
	time.Sleep(300 * time.Millisecond)
	for name, want := range map[string]int{"ok-1": 1, "ok-2": 1, "flaky": 4, "broken": 1} {
		if got := subs[name].byID(t); got["evt-1"] != want || len(got) != 1 {
			t.Errorf("%s received %v; want evt-1 %d times", name, got, want)
		}
	}
	m := g.Metrics()
	for _, want := range []string{delivered("ok-1", "delivered"), delivered("ok-2", "delivered"),
		`hookgate_sender_attempts_total{destination="flaky",result="transient"} 3`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "hookgate_sender_"))
		}
	}
	st, _, raw := send(t, http.MethodGet, g.Admin+"/hookgate/dlq", nil, nil)
	var dlq struct {
		Entries []struct{ ID, Destination, Class string }
	}
	if err := json.Unmarshal(raw, &dlq); st != 200 || err != nil {
		t.Fatalf("GET /hookgate/dlq: %d %s", st, raw)
	}
	if len(dlq.Entries) != 1 || dlq.Entries[0].ID != "evt-1" || dlq.Entries[0].Destination != "broken" || dlq.Entries[0].Class != "http_4xx" {
		t.Errorf("dead letters %+v; want evt-1 of broken alone, http_4xx", dlq.Entries)
	}
}

// TestFanOutCompletesAfterSIGKILL kills the gateway with SIGKILL while one
// event's fan-out to 200 destinations is being written (on Redis), then
// starts it again and publishes the same event: every destination ends
// with the event once, and the answer names as duplicates exactly the
// destinations whose envelope was written before the kill.
func TestFanOutCompletesAfterSIGKILL(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := redistest.Prefix("fan")
	const n = 200
	// The subscribers' port takes no connection until the restart: every
	// attempt before it fails (transient), so none is delivered before the
	// kill, and each destination's deliveries are counted from one start.
	port := freePort(t)
	names := make([]string, n)
	var dests []string
	for i := range names {
		names[i] = fmt.Sprintf("d%03d", i)
		dests = append(dests, fanDest(names[i], fmt.Sprintf("http://127.0.0.1:%d/%s", port, names[i]), "reservation.*"))
	}
	sender := "attempts 1000\n\t\t\tbackoff 100ms 1s\n\t\t\ttimeout 1s\n\t\t\tlease 3s\n\t\t\tbreaker {\n\t\t\t\tfailures 100000\n\t\t\t}"
	opts := gatewayOptions{Global: fanGlobal(fmt.Sprintf("store redis %s\n\t\tkey_prefix %s", srv.URL(), prefix), sender, dests...)}

	// in lists the destinations whose key suffix (meta: queued or leased;
	// done or hidx, the delivered IDs before and since the history) holds
	// id, one pipeline for all: quick enough to watch a fan-out's writes.
	in := func(id string, suffixes ...string) []string {
		t.Helper()
		pipe := rdb.Pipeline()
		cmds := make([][]*redis.BoolCmd, len(names))
		for i, d := range names {
			for _, suffix := range suffixes {
				cmds[i] = append(cmds[i], pipe.HExists(t.Context(), prefix+":q:{"+d+"}:"+suffix, id))
			}
		}
		if _, err := pipe.Exec(t.Context()); err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, d := range names {
			if slices.ContainsFunc(cmds[i], func(c *redis.BoolCmd) bool { return c.Val() }) {
				out = append(out, d)
			}
		}
		return out
	}
	// held lists the destinations holding id, before the subscribers are
	// up: nothing can have been delivered, so every envelope is queued or
	// leased.
	held := func(id string) []string { return in(id, "meta") }
	body := func(id string) string { return fmt.Sprintf(`{"type":"reservation.confirmed","id":%q}`, id) }

	const tries = 8
	var id string
	var before []string
	for try := 1; ; try++ {
		if try > tries {
			t.Fatalf("in %d tries the kill never landed while the fan-out was being written (between 1 and %d envelopes)", tries, n-1)
		}
		id = fmt.Sprintf("evt-kill-%d", try)
		g := startGateway(t, fanSite, opts)
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			// The kill cuts the answer off: there is none to check.
			resp, err := http.Post(g.URL+"/events/", "application/json", strings.NewReader(body(id)))
			if err == nil {
				_ = resp.Body.Close()
			}
		}()
		// Kill once about half the envelopes are written; if the kill
		// lands late, aim earlier the next time.
		target := max(1, n/2>>(try-1))
		deadline := time.Now().Add(10 * time.Second)
		for len(held(id)) < target && time.Now().Before(deadline) {
			select {
			case <-answered:
				deadline = time.Now() // it went by between two looks
			default:
			}
		}
		g.Kill()
		<-answered
		before = held(id)
		if len(before) > 0 && len(before) < n {
			t.Logf("try %d: killed with %d of %d envelopes written", try, len(before), n)
			break
		}
		t.Logf("try %d: the kill landed with %d of %d envelopes written; again", try, len(before), n)
	}

	// The subscribers come up, and the gateway starts again on the same
	// Redis; the producer publishes the event again, through the admin API.
	var mu sync.Mutex
	got := map[string]int{} // destination -> deliveries of id
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	rcv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Webhook-Id") == id {
			mu.Lock()
			got[strings.TrimPrefix(r.URL.Path, "/")]++
			mu.Unlock()
		}
	}))
	_ = rcv.Listener.Close()
	rcv.Listener = ln
	rcv.Start()
	t.Cleanup(rcv.Close)
	g := startGateway(t, fanSite, opts)
	a := publishAdmin(t, g, id, "reservation.confirmed", body(id))
	var want []string
	for _, d := range names {
		if slices.Contains(before, d) {
			want = append(want, d+" dup")
		} else {
			want = append(want, d)
		}
	}
	if a.Status != 202 {
		t.Fatalf("publishing again: %d %s", a.Status, a.raw)
	}
	if diff := cmp.Diff(want, a.routed()); diff != "" {
		t.Errorf("publishing again: the deliveries, duplicates for the %d written before the kill (-want +got):\n%s", len(before), diff)
	}
	if after := in(id, "meta", "done", "hidx"); len(after) != n {
		t.Errorf("after publishing again %d destinations hold %s, want %d", len(after), id, n)
	}
	// Each destination's envelope is delivered and settles: it leaves the
	// queue for the delivered IDs; none is delivered twice meanwhile.
	waitFor(t, "every delivery settled", func() bool {
		return len(in(id, "meta")) == 0 && len(in(id, "done", "hidx")) == n
	})
	mu.Lock()
	defer mu.Unlock()
	for _, d := range names {
		if got[d] != 1 {
			t.Errorf("%s received %s %d times, want once", d, id, got[d])
		}
	}
}
