package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// freshSite is the enrollment chain: verify, dedupe, freshness, proxy.
func freshSite(upstreamAddr, freshnessOptions string) string {
	return fmt.Sprintf(`
	webhook_verify {
		secret %s
	}
	webhook_dedupe {
		in_flight wait 10s
	}
	webhook_freshness {
		entity {webhook.json.reservation_id}
		event_time {webhook.json.occurred_at}
		%s
	}
	reverse_proxy %s`, devSecret, freshnessOptions, upstreamAddr)
}

// event is a reservation webhook body.
func event(typ, reservation string, at time.Time) []byte {
	return fmt.Appendf(nil, `{"type":%q,"reservation_id":%q,"occurred_at":%q}`, typ, reservation, at.UTC().Format(time.RFC3339Nano))
}

// eventTimes reads occurred_at from what the upstream received.
func eventTimes(t *testing.T, rs []recorded) []time.Time {
	t.Helper()
	var out []time.Time
	for _, r := range rs {
		var e struct {
			OccurredAt time.Time `json:"occurred_at"`
		}
		if err := json.Unmarshal(r.Body, &e); err != nil {
			t.Fatalf("upstream body %q: %v", r.Body, err)
		}
		out = append(out, e.OccurredAt)
	}
	return out
}

// TestFreshnessStory is docs/receiving.md's story: the seat's hold expires at
// 10:00, the payment confirms it at 10:05, and the delayed
// reservation.expired (event time 10:00) arrives at 10:12. It must not be
// applied, and its duplicate must get the same answer.
func TestFreshnessStory(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, nil)
		g := startGateway(t, freshSite(up.Addr(), ""), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		day := time.Now().UTC().Add(-24 * time.Hour).Truncate(24 * time.Hour)
		r := randomID("r-")
		confirmed := event("reservation.confirmed", r, day.Add(10*time.Hour+5*time.Minute))
		expired := event("reservation.expired", r, day.Add(10*time.Hour))

		st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), confirmed), confirmed)
		if st != 200 || up.count() != 1 {
			t.Fatalf("confirmed at 10:05: %d %s, upstream %d; want applied", st, got, up.count())
		}
		expiredID := randomID("msg_")
		st, hdr, got := post(t, g.URL, s.Sign(expiredID, time.Now(), expired), expired)
		if st != 200 || strings.TrimSpace(string(got)) != `{"status":"stale","reason":"superseded"}` || up.count() != 1 {
			t.Fatalf("expired at 10:00, arriving later: %d %s, upstream %d; want 200 stale superseded, not forwarded", st, got, up.count())
		}
		if hdr.Get("Content-Type") != "application/json" {
			t.Errorf("stale answer Content-Type = %q", hdr.Get("Content-Type"))
		}
		// The sender retries the same delivery: dedupe replays the stale answer.
		st, hdr, again := post(t, g.URL, s.Sign(expiredID, time.Now(), expired), expired)
		if st != 200 || string(again) != string(got) || hdr.Get("Idempotent-Replayed") != "true" || up.count() != 1 {
			t.Fatalf("duplicate of the stale event: %d %s replayed %q; want the same answer replayed", st, again, hdr.Get("Idempotent-Replayed"))
		}
		if m := g.Metrics(); !strings.Contains(m, `hookgate_freshness_total{result="superseded"} 1`) || !strings.Contains(m, `hookgate_freshness_total{result="applied"} 1`) {
			t.Errorf("freshness metrics:\n%s", grepLines(m, "hookgate_freshness"))
		}
	})
}

// TestFreshnessConcurrentRandomOrder sends 50 events of one entity with
// random event times, concurrently and in random order: what the upstream
// applies never goes backwards, and the newest time is the last applied.
func TestFreshnessConcurrentRandomOrder(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			time.Sleep(2 * time.Millisecond) // hold the entity a moment
			w.WriteHeader(200)
		})
		g := startGateway(t, freshSite(up.Addr(), "entity_busy wait 60s"), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		rng := rand.New(rand.NewPCG(1, 2))
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		r := randomID("r-")
		const n = 50
		times := make([]time.Time, n)
		newest := base
		for i := range times {
			times[i] = base.Add(time.Duration(rng.IntN(3600)) * time.Second)
			if times[i].After(newest) {
				newest = times[i]
			}
		}
		var wg sync.WaitGroup
		for _, i := range rng.Perm(n) {
			body := event("reservation.updated", r, times[i])
			wg.Go(func() {
				if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), body), body); st != 200 {
					t.Errorf("event %d: %d %s", i, st, got)
				}
			})
		}
		wg.Wait()
		applied := eventTimes(t, up.received())
		if len(applied) == 0 {
			t.Fatal("nothing applied")
		}
		for i := 1; i < len(applied); i++ {
			if applied[i].Before(applied[i-1]) {
				t.Fatalf("applied event times went backwards at %d: %v after %v", i, applied[i], applied[i-1])
			}
		}
		if last := applied[len(applied)-1]; !last.Equal(newest) {
			t.Errorf("last applied %v, want the newest %v", last, newest)
		}
		// The watermark is the newest: one second older is superseded.
		probe := event("reservation.updated", r, newest.Add(-time.Second))
		if _, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), probe), probe); !strings.Contains(string(got), "superseded") {
			t.Errorf("probe older than the newest: %s; want superseded", got)
		}
	})
}

// TestFreshnessOtherEntitiesNotHeldUp holds one entity's forward at the
// upstream and checks another entity's event goes through meanwhile, and
// that the held entity's next event waits, then gets 409 entity_busy.
func TestFreshnessOtherEntitiesNotHeldUp(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"r-held"`) {
			held <- struct{}{}
			<-release
		}
		w.WriteHeader(200)
	})
	t.Cleanup(func() { close(release) })
	g := startGateway(t, freshSite(up.Addr(), "entity_busy wait 1s\n\t\tlease 20s"), gatewayOptions{})
	s := signer(t, "standard", devSecret)
	now := time.Now()
	first := event("reservation.confirmed", "r-held", now.Add(-time.Minute))
	done := make(chan int)
	go func() {
		st, _, _ := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), first), first)
		done <- st
	}()
	<-held
	other := event("reservation.confirmed", "r-other", now.Add(-time.Minute))
	if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), other), other); st != 200 {
		t.Fatalf("another entity while r-held is busy: %d %s", st, got)
	}
	second := event("reservation.updated", "r-held", now)
	st, hdr, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), second), second)
	if st != 409 || problemBody(t, st, hdr, got) != "entity_busy" || hdr.Get("Retry-After") == "" {
		t.Fatalf("same entity while busy: %d %s Retry-After %q; want 409 entity_busy", st, got, hdr.Get("Retry-After"))
	}
	release <- struct{}{}
	if st := <-done; st != 200 {
		t.Errorf("held event: %d", st)
	}
}

// TestFreshnessUpstreamFailureKeepsWatermark: a 5xx moves nothing, so an
// older event is still applied, and the retry is judged afresh.
func TestFreshnessUpstreamFailureKeepsWatermark(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		var mu sync.Mutex
		fail := true
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				w.WriteHeader(503)
				return
			}
			w.WriteHeader(200)
		})
		g := startGateway(t, freshSite(up.Addr(), ""), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		r := randomID("r-")
		now := time.Now()
		newer := event("reservation.confirmed", r, now.Add(-time.Minute))
		newerID := randomID("msg_")
		if st, _, _ := post(t, g.URL, s.Sign(newerID, time.Now(), newer), newer); st != 503 {
			t.Fatalf("newer event: %d, want the upstream's 503", st)
		}
		mu.Lock()
		fail = false
		mu.Unlock()
		older := event("reservation.held", r, now.Add(-2*time.Minute))
		if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), older), older); st != 200 || strings.Contains(string(got), "stale") {
			t.Fatalf("older event after the failed newer one: %d %s; want applied", st, got)
		}
		if st, _, got := post(t, g.URL, s.Sign(newerID, time.Now(), newer), newer); st != 200 || strings.Contains(string(got), "stale") {
			t.Fatalf("retry of the newer event: %d %s; want applied", st, got)
		}
		if up.count() != 3 {
			t.Errorf("upstream received %d, want 3", up.count())
		}
	})
}

// TestFreshnessMaxAge judges age by event time, not arrival.
func TestFreshnessMaxAge(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, nil)
		g := startGateway(t, freshSite(up.Addr(), "max_age 1h"), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		now := time.Now()
		// Arrives promptly (fresh signature), but happened two hours ago.
		old := event("reservation.expired", randomID("r-"), now.Add(-2*time.Hour))
		st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), now, old), old)
		if st != 200 || strings.TrimSpace(string(got)) != `{"status":"stale","reason":"too_old"}` || up.count() != 0 {
			t.Fatalf("two-hour-old event: %d %s, upstream %d; want stale too_old", st, got, up.count())
		}
		// Happened 50 minutes ago and arrives only now, after the sender's
		// retries: still within max_age, so applied.
		young := event("reservation.confirmed", randomID("r-"), now.Add(-50*time.Minute))
		if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), now, young), young); st != 200 || up.count() != 1 {
			t.Fatalf("late arrival of a young event: %d %s, upstream %d; want applied", st, got, up.count())
		}
	})
}

// TestFreshnessRejectAndBadInput covers on_stale reject (409, not recorded,
// judged afresh) and the 400s.
func TestFreshnessRejectAndBadInput(t *testing.T) {
	up := newUpstream(t, nil)
	site := fmt.Sprintf(`
	webhook_verify {
		secret %[1]s
	}
	route /time {
		webhook_dedupe
		webhook_freshness {
			entity {webhook.json.reservation_id}
			event_time {webhook.json.occurred_at}
			on_stale reject
		}
		reverse_proxy %[2]s
	}
	route /seq {
		webhook_freshness {
			entity {webhook.json.reservation_id}
			sequence {webhook.json.seq}
		}
		reverse_proxy %[2]s
	}`, devSecret, up.Addr())
	g := startGateway(t, site, gatewayOptions{})
	s := signer(t, "standard", devSecret)
	send := func(path string, body string) (int, string) {
		st, hdr, got := post(t, g.URL+path, s.Sign(randomID("msg_"), time.Now(), []byte(body)), []byte(body))
		if st >= 400 {
			return st, problemBody(t, st, hdr, got)
		}
		return st, string(got)
	}
	now := time.Now().UTC()
	r := randomID("r-")
	send("/time", string(event("reservation.confirmed", r, now.Add(-time.Minute))))
	staleBody := event("reservation.expired", r, now.Add(-2*time.Minute))
	staleID := randomID("msg_")
	for range 2 { // not recorded: each retry is judged afresh, and rejected again
		st, hdr, got := post(t, g.URL+"/time", s.Sign(staleID, time.Now(), staleBody), staleBody)
		if st != 409 || problemBody(t, st, hdr, got) != "superseded" || hdr.Get("Idempotent-Replayed") != "" {
			t.Fatalf("on_stale reject: %d %s; want 409 superseded, not replayed", st, got)
		}
	}

	tests := []struct{ path, body, want string }{
		{"/time", `{"occurred_at":"2026-11-30T10:00:00Z"}`, "missing_entity"},
		{"/time", `{"reservation_id":"r-1"}`, "missing_event_time"},
		{"/time", `{"reservation_id":"r-1","occurred_at":"yesterday"}`, "malformed_event_time"},
		{"/time", fmt.Sprintf(`{"reservation_id":"r-1","occurred_at":%q}`, now.Add(10*time.Minute).Format(time.RFC3339)), "event_time_in_future"},
		{"/seq", `{"reservation_id":"r-1"}`, "missing_sequence"},
		{"/seq", `{"reservation_id":"r-1","seq":1.5}`, "malformed_sequence"},
		{"/seq", `{"reservation_id":"r-1","seq":-3}`, "malformed_sequence"},
	}
	before := up.count()
	for _, tt := range tests {
		if st, reason := send(tt.path, tt.body); st != 400 || reason != tt.want {
			t.Errorf("%s %s: %d %s; want 400 %s", tt.path, tt.body, st, reason, tt.want)
		}
	}
	if up.count() != before {
		t.Errorf("bad input reached the upstream")
	}

	// Sequence numbers: unix seconds as event times work too.
	seqEntity := randomID("r-")
	for _, c := range []struct {
		seq   string
		stale bool
	}{{"5", false}, {"3", true}, {`"7"`, false}, {"7", false}, {"6", true}} {
		_, got := send("/seq", fmt.Sprintf(`{"reservation_id":%q,"seq":%s}`, seqEntity, c.seq))
		if strings.Contains(got, "stale") != c.stale {
			t.Errorf("seq %s: %s; stale = %v", c.seq, got, c.stale)
		}
	}
	unix := fmt.Sprintf(`{"reservation_id":%q,"occurred_at":"%d"}`, randomID("r-"), now.Add(-time.Minute).Unix())
	if st, got := send("/time", unix); st != 200 || strings.Contains(got, "stale") {
		t.Errorf("unix-seconds event time: %d %s", st, got)
	}
}
