package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

func randomID(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// redisGlobal is the hookgate global option for a Redis store with a key
// prefix of its own.
func redisGlobal(url string) string {
	return fmt.Sprintf("hookgate {\n\t\tstore redis %s\n\t\tkey_prefix %s\n\t}", url, redistest.Prefix("it"))
}

// dedupeSite is a verify + dedupe + reverse_proxy chain.
func dedupeSite(upstreamAddr, dedupeOptions string) string {
	return fmt.Sprintf(`
	webhook_verify {
		secret %s
	}
	webhook_dedupe {
		%s
	}
	reverse_proxy %s`, devSecret, dedupeOptions, upstreamAddr)
}

// backends runs f against the embedded store and against a real Redis.
func backends(t *testing.T, f func(t *testing.T, global string)) {
	t.Run("file", func(t *testing.T) { f(t, "") })
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		f(t, redisGlobal(srv.URL()))
	})
}

// TestDedupeConcurrentCopiesTwoInstances sends 200 concurrent copies of one
// delivery, spread over two hookgate instances sharing Redis: the upstream
// sees one, and every copy gets the same answer.
func TestDedupeConcurrentCopiesTwoInstances(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		time.Sleep(300 * time.Millisecond) // keep the first forward in flight
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Enrollment", "e-1")
		_, _ = fmt.Fprintf(w, `{"enrolled":true,"at":%q}`, time.Now().Format(time.RFC3339Nano))
	})
	global := redisGlobal(srv.URL())
	site := dedupeSite(up.Addr(), "in_flight wait 10s")
	g1 := startGateway(t, site, gatewayOptions{Global: global})
	g2 := startGateway(t, site, gatewayOptions{Global: global})

	body := []byte(`{"type":"reservation.confirmed","reservation_id":"r-200"}`)
	h := signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body)
	const n = 200
	type answer struct {
		status int
		body   string
		replay string
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		g := g1
		if i%2 == 1 {
			g = g2
		}
		wg.Go(func() {
			status, hdr, got := post(t, g.URL+"/hooks", h, body)
			answers[i] = answer{status, string(got), hdr.Get("Idempotent-Replayed")}
		})
	}
	wg.Wait()
	if c := up.count(); c != 1 {
		t.Fatalf("upstream received %d copies, want 1", c)
	}
	replays := 0
	for i, a := range answers {
		if a.status != 200 || a.body != answers[0].body {
			t.Fatalf("copy %d: status %d body %q; want 200 %q", i, a.status, a.body, answers[0].body)
		}
		if a.replay == "true" {
			replays++
		}
	}
	if replays != n-1 {
		t.Errorf("%d copies marked Idempotent-Replayed, want %d", replays, n-1)
	}
	m := g1.Metrics() + g2.Metrics()
	if !strings.Contains(m, `hookgate_dedupe_requests_total{result="forwarded"} 1`) {
		t.Errorf("no forwarded count in metrics:\n%s", grepLines(m, "hookgate_dedupe"))
	}
	if !strings.Contains(m, `hookgate_store_op_duration_seconds_count{backend="redis",namespace="webhook",op="claim"}`) {
		t.Errorf("no store latency in metrics:\n%s", grepLines(m, "hookgate_store"))
	}
}

// TestDedupeInFlightReject checks the default: a copy that finds the first
// in flight gets 409 in_flight with a Retry-After of the remaining lease.
func TestDedupeInFlightReject(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		<-release
		w.WriteHeader(200)
	})
	g := startGateway(t, dedupeSite(up.Addr(), "lease 20s"), gatewayOptions{})
	body := []byte(`{"n":1}`)
	h := signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body)
	first := make(chan int)
	go func() {
		status, _, _ := post(t, g.URL, h, body)
		first <- status
	}()
	for up.count() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	status, hdr, got := post(t, g.URL, h, body)
	if status != 409 || problemBody(t, status, hdr, got) != "in_flight" {
		t.Fatalf("copy in flight: %d %s; want 409 in_flight", status, got)
	}
	if ra := hdr.Get("Retry-After"); ra < "1" || len(ra) > 2 {
		t.Errorf("Retry-After = %q, want 1..20 seconds", ra)
	}
	close(release)
	if s := <-first; s != 200 {
		t.Errorf("first copy: %d", s)
	}
}

// TestDedupeOutcomes checks what is final and what is not, on both stores.
func TestDedupeOutcomes(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		var mu sync.Mutex
		answer := 503
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			mu.Lock()
			status := answer
			mu.Unlock()
			if status == 0 {
				time.Sleep(2 * time.Second) // longer than the proxy's timeout
				status = 200
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"status":%d}`, status)
		})
		set := func(s int) { mu.Lock(); answer = s; mu.Unlock() }
		site := fmt.Sprintf(`
	webhook_verify {
		secret %[1]s
	}
	route /default {
		webhook_dedupe
		reverse_proxy %[2]s {
			transport http {
				response_header_timeout 500ms
			}
		}
	}
	route /record4xx {
		webhook_dedupe {
			record 2xx 4xx
		}
		reverse_proxy %[2]s
	}`, devSecret, up.Addr())
		g := startGateway(t, site, gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		send := func(path, id string, body []byte) (int, http.Header, []byte) {
			return post(t, g.URL+path, s.Sign(id, time.Now(), body), body)
		}
		body := []byte(`{"type":"reservation.confirmed"}`)

		t.Run("503 is not recorded", func(t *testing.T) {
			id, before := randomID("msg_"), up.count()
			set(503)
			if st, _, _ := send("/default", id, body); st != 503 {
				t.Fatalf("status %d, want the upstream's 503", st)
			}
			set(200)
			st, hdr, _ := send("/default", id, body)
			if st != 200 || hdr.Get("Idempotent-Replayed") != "" || up.count() != before+2 {
				t.Fatalf("retry: status %d replayed %q upstream +%d; want forwarded again", st, hdr.Get("Idempotent-Replayed"), up.count()-before)
			}
			st, hdr, _ = send("/default", id, body)
			if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || up.count() != before+2 {
				t.Fatalf("duplicate of the 200: status %d replayed %q upstream +%d; want a replay", st, hdr.Get("Idempotent-Replayed"), up.count()-before)
			}
		})

		t.Run("timeout is not recorded", func(t *testing.T) {
			id, before := randomID("msg_"), up.count()
			set(0)
			if st, _, got := send("/default", id, body); st != 504 {
				t.Fatalf("status %d (%s), want 504 from the proxy's timeout", st, got)
			}
			set(200)
			if st, hdr, _ := send("/default", id, body); st != 200 || hdr.Get("Idempotent-Replayed") != "" || up.count() != before+2 {
				t.Fatalf("retry: status %d, upstream +%d; want forwarded again", st, up.count()-before)
			}
		})

		t.Run("422 is not recorded by default", func(t *testing.T) {
			id, before := randomID("msg_"), up.count()
			set(422)
			send("/default", id, body)
			if st, _, _ := send("/default", id, body); st != 422 || up.count() != before+2 {
				t.Fatalf("retry: status %d, upstream +%d; want the 422 forwarded twice", st, up.count()-before)
			}
		})

		t.Run("422 is replayed with record 2xx 4xx", func(t *testing.T) {
			id, before := randomID("msg_"), up.count()
			set(422)
			_, _, first := send("/record4xx", id, body)
			set(200)
			st, hdr, got := send("/record4xx", id, body)
			if st != 422 || hdr.Get("Idempotent-Replayed") != "true" || !bytes.Equal(got, first) || up.count() != before+1 {
				t.Fatalf("duplicate: %d %q replayed %q, upstream +%d; want the recorded 422", st, got, hdr.Get("Idempotent-Replayed"), up.count()-before)
			}
			if hdr.Get("Content-Type") != "application/json" {
				t.Errorf("replayed Content-Type = %q", hdr.Get("Content-Type"))
			}
		})

		t.Run("same ID, different body", func(t *testing.T) {
			id := randomID("msg_")
			set(200)
			send("/default", id, body)
			before := up.count()
			st, hdr, got := send("/default", id, []byte(`{"type":"reservation.expired"}`))
			if st != 422 || problemBody(t, st, hdr, got) != "key_reused_with_different_payload" || up.count() != before {
				t.Fatalf("status %d %s, upstream +%d; want 422 key_reused_with_different_payload, nothing forwarded", st, got, up.count()-before)
			}
		})
	})
}

// TestDedupeMissingKey checks a key placeholder that resolves to nothing.
func TestDedupeMissingKey(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, fmt.Sprintf(`
	webhook_dedupe {
		key {http.request.header.Idempotency-Key}
	}
	reverse_proxy %s`, up.Addr()), gatewayOptions{})
	st, hdr, got := post(t, g.URL, http.Header{}, []byte(`{}`))
	if st != 400 || problemBody(t, st, hdr, got) != "missing_idempotency_key" || up.count() != 0 {
		t.Fatalf("%d %s; want 400 missing_idempotency_key", st, got)
	}
	h := http.Header{"Idempotency-Key": {"k-1"}}
	post(t, g.URL, h, []byte(`{}`))
	if st, hdr, _ := post(t, g.URL, h, []byte(`{}`)); st != 200 || hdr.Get("Idempotent-Replayed") != "true" || up.count() != 1 {
		t.Fatalf("duplicate by header key: %d, upstream %d", st, up.count())
	}
}

// TestDedupeReviewCases covers what a review found: hookgate's own 409s
// are never recorded even with record 2xx 4xx, headers set before dedupe
// are not recorded, verify's max_body is honoured, and a response over
// max_record streams through and is replayed without its body.
func TestDedupeReviewCases(t *testing.T) {
	big := bytes.Repeat([]byte("z"), 2<<20)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path == "/large" {
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			_, _ = w.Write(big)
			return
		}
		w.Header().Set("X-From-Upstream", "yes")
		w.WriteHeader(200)
	})
	site := fmt.Sprintf(`
	header X-Request-Id {http.request.uuid}
	webhook_verify {
		secret %[1]s
		max_body 4MiB
	}
	route /busy {
		webhook_dedupe {
			record 2xx 4xx
		}
		webhook_freshness {
			entity {webhook.json.reservation_id}
			sequence {webhook.json.seq}
			entity_busy reject
		}
		reverse_proxy %[2]s
	}
	route /* {
		webhook_dedupe {
			max_record 1KiB
		}
		reverse_proxy %[2]s
	}`, devSecret, up.Addr())
	g := startGateway(t, site, gatewayOptions{})
	s := signer(t, "standard", devSecret)

	t.Run("request headers are not recorded", func(t *testing.T) {
		body := []byte(`{"a":1}`)
		h := s.Sign(randomID("msg_"), time.Now(), body)
		_, h1, _ := post(t, g.URL+"/plain", h, body)
		_, h2, _ := post(t, g.URL+"/plain", h, body)
		if h2.Get("Idempotent-Replayed") != "true" || h2.Get("X-From-Upstream") != "yes" {
			t.Fatalf("replay headers: %v", h2)
		}
		if h1.Get("X-Request-Id") == h2.Get("X-Request-Id") {
			t.Errorf("the replay carries the first request's X-Request-Id %q", h1.Get("X-Request-Id"))
		}
	})

	t.Run("verify max_body is honoured", func(t *testing.T) {
		h := s.Sign(randomID("msg_"), time.Now(), big)
		if st, _, got := post(t, g.URL+"/plain", h, big); st != 200 {
			t.Fatalf("2 MiB body under max_body 4MiB: %d %s", st, got)
		}
	})

	t.Run("large response is replayed without its body", func(t *testing.T) {
		body := []byte(`{"b":2}`)
		h := s.Sign(randomID("msg_"), time.Now(), body)
		_, _, first := post(t, g.URL+"/large", h, body)
		if len(first) != len(big) {
			t.Fatalf("first answer: %d bytes, want %d", len(first), len(big))
		}
		before := up.count()
		st, hdr, got := post(t, g.URL+"/large", h, body)
		if st != 200 || hdr.Get("Idempotent-Body-Omitted") != "true" || len(got) != 0 || up.count() != before {
			t.Fatalf("replay: %d omitted %q %d bytes, upstream +%d", st, hdr.Get("Idempotent-Body-Omitted"), len(got), up.count()-before)
		}
	})

	t.Run("entity_busy is not recorded", func(t *testing.T) {
		// A first event of the entity is kept in flight at the upstream.
		entity := randomID("r-")
		body := fmt.Appendf(nil, `{"reservation_id":%q,"seq":2}`, entity)
		h := s.Sign(randomID("msg_"), time.Now(), body)
		hold := fmt.Appendf(nil, `{"reservation_id":%q,"seq":1,"hold":true}`, entity)
		release := make(chan struct{})
		started := make(chan struct{})
		up.mu.Lock()
		prev := up.handle
		up.handle = func(w http.ResponseWriter, r *http.Request, b []byte) {
			if bytes.Contains(b, []byte(`"hold":true`)) {
				close(started)
				<-release
			}
			w.WriteHeader(200)
		}
		up.mu.Unlock()
		defer func() { up.mu.Lock(); up.handle = prev; up.mu.Unlock() }()
		done := make(chan struct{})
		go func() {
			post(t, g.URL+"/busy", s.Sign(randomID("msg_"), time.Now(), hold), hold)
			close(done)
		}()
		<-started
		st, _, got := post(t, g.URL+"/busy", h, body)
		if st != 409 || !strings.Contains(string(got), "entity_busy") {
			t.Fatalf("while the entity is held: %d %s; want 409 entity_busy", st, got)
		}
		close(release)
		<-done
		st, hdr, got := post(t, g.URL+"/busy", h, body)
		if st != 200 || hdr.Get("Idempotent-Replayed") != "" {
			t.Fatalf("retry after the entity is free: %d %s replayed %q; want forwarded (the 409 was not recorded)", st, got, hdr.Get("Idempotent-Replayed"))
		}
	})
}
