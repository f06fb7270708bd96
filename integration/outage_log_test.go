package integration

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// TestDedupeOutageLogQuiet: during a Redis outage, each request
// webhook_dedupe rejected logged "dedupe store failed": 200 requests gave
// 201 lines. The handler now logs the first failure, then at most one
// line a minute with the count since, then the end of the outage.
func TestDedupeOutageLogQuiet(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, nil)
	g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{Global: redisGlobal(srv.URL())})
	s := signer(t, "standard", devSecret)
	body := []byte(`{"type":"reservation.confirmed"}`)
	if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), body), body); st != 200 {
		t.Fatalf("before the outage: %d %s", st, got)
	}

	srv.Stop()
	start := time.Now()
	var wg sync.WaitGroup
	ids := make(chan string)
	for range 8 {
		wg.Go(func() {
			for id := range ids {
				if st, _, got := post(t, g.URL, s.Sign(id, time.Now(), body), body); st != 503 {
					t.Errorf("during the outage: %d %s, want 503", st, got)
				}
			}
		})
	}
	for range 200 {
		ids <- randomID("msg_")
	}
	close(ids)
	wg.Wait()
	outage := time.Since(start)

	lines := 0
	for _, l := range strings.Split(g.logs.String(), "\n") {
		if strings.Contains(l, "dedupe store failed") || strings.Contains(l, "dedupe store still failing") {
			lines++
		}
	}
	// The first, and one a minute at most after it.
	if most := 1 + int(outage/time.Minute); lines < 1 || lines > most {
		t.Errorf("200 rejected requests in %s logged %d store-failure lines, want 1 to %d", outage.Round(time.Second), lines, most)
	}

	srv.Restart()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, _, _ := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), body), body)
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Redis came back: %d", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(g.logs.String(), "dedupe store answers again") {
		t.Errorf("the end of the outage is not logged")
	}
}
