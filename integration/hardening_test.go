package integration

// The hostile review's cases (issue 7): paths where a delivery reached the
// upstream twice without any crash, and inputs that got something other
// than a precise answer. Each test reproduces the fault with real
// processes: a raw-socket upstream that misbehaves, a redis-server that
// sleeps, refuses writes or evicts, a corrupted file.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawUpstream is a TCP server speaking just enough HTTP/1.1 to misbehave.
// For each request read, serve gets the connection's n-th request (from 1)
// and the connection, writes what it likes, and reports whether to keep
// the connection for another request.
type rawUpstream struct {
	ln    net.Listener
	mu    sync.Mutex
	seen  map[string]int // requests by Webhook-Id (or X-GitHub-Delivery)
	total int
}

func newRawUpstream(t *testing.T, serve func(n int, req *http.Request, body []byte, c net.Conn) (keep bool)) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, seen: map[string]int{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = c.Close() }()
				br := bufio.NewReader(c)
				for n := 1; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, _ := io.ReadAll(req.Body)
					u.mu.Lock()
					id := req.Header.Get("Webhook-Id") + req.Header.Get("X-GitHub-Delivery")
					u.seen[id]++
					u.total++
					u.mu.Unlock()
					if !serve(n, req, body, c) {
						return
					}
				}
			})
		}
	})
	return u
}

func (u *rawUpstream) Addr() string { return u.ln.Addr().String() }

func (u *rawUpstream) count(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[id]
}

func (u *rawUpstream) requests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.total
}

// answer200 writes a whole 200 response with body on c.
func answer200(c net.Conn, body string) {
	_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// TestForwardSettlesTruncatedResponse: the upstream answers 200 with a
// Content-Length of 1000, sends ten bytes and closes. reverse_proxy aborts
// (http.ErrAbortHandler); the status was final, so it is recorded without
// its body, the waiting client gets a precise 502, and the retry is
// replayed, not forwarded again.
func TestForwardSettlesTruncatedResponse(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newRawUpstream(t, func(_ int, _ *http.Request, _ []byte, c net.Conn) bool {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"enrolled")
			return false
		})
		g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		body := []byte(`{"type":"reservation.confirmed"}`)
		id := randomID("msg_")
		st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if st != 502 || problemBody(t, st, hdr, got) != "upstream_response_incomplete" {
			t.Fatalf("truncated answer: %d %s; want 502 upstream_response_incomplete", st, got)
		}
		st, hdr, got = post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || hdr.Get("Idempotent-Body-Omitted") != "true" || len(got) != 0 {
			t.Fatalf("retry: %d replayed %q omitted %q %q; want the 200 replayed without its body",
				st, hdr.Get("Idempotent-Replayed"), hdr.Get("Idempotent-Body-Omitted"), got)
		}
		if n := up.count(id); n != 1 {
			t.Fatalf("upstream received %d copies, want 1", n)
		}
	})
}

// TestBrokenRetryableAnswerIsReleased: an answer that is not final (a
// 503) and breaks off mid-body is not recorded, and its claim is released
// at once: the next copy is forwarded at once, not refused 409 until the
// lease ends.
func TestBrokenRetryableAnswerIsReleased(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		var copies atomic.Int64
		up := newRawUpstream(t, func(_ int, _ *http.Request, _ []byte, c net.Conn) bool {
			if copies.Add(1) == 1 {
				_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000\r\n\r\n{\"retry")
				return false
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return true
		})
		g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		body := []byte(`{"type":"reservation.confirmed"}`)
		id := randomID("msg_")
		if st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), body), body); st != 502 || problemBody(t, st, hdr, got) != "upstream_response_incomplete" {
			t.Fatalf("broken 503: %d %s; want 502 upstream_response_incomplete", st, got)
		}
		st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if st != 200 || hdr.Get("Idempotent-Replayed") != "" || string(got) != "ok" {
			t.Fatalf("the next copy: %d replayed %q %q; want it forwarded at once (200 ok)", st, hdr.Get("Idempotent-Replayed"), got)
		}
		if n := up.count(id); n != 2 {
			t.Fatalf("upstream received %d copies, want 2", n)
		}
	})
}

// TestForwardRunsToTheEndWhenTheClientLeaves: a client hangs up while a
// response over max_record streams to it. The copy from the upstream runs
// to its end (the bytes are discarded), the outcome is recorded, and the
// retry is replayed.
func TestForwardRunsToTheEndWhenTheClientLeaves(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		const size, chunk = 4 << 20, 64 << 10
		var (
			mu       sync.Mutex
			writeErr error
			finished = make(chan struct{}, 1)
		)
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			w.WriteHeader(200)
			for sent := 0; sent < size; sent += chunk {
				if _, err := w.Write(bytes.Repeat([]byte("a"), chunk)); err != nil {
					mu.Lock()
					writeErr = err
					mu.Unlock()
					break
				}
				w.(http.Flusher).Flush()
				time.Sleep(5 * time.Millisecond)
			}
			finished <- struct{}{}
		})
		g := startGateway(t, dedupeSite(up.Addr(), "max_record 1KiB"), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		body := []byte(`{"type":"reservation.confirmed"}`)
		id := randomID("msg_")

		req, _ := http.NewRequest(http.MethodPost, g.URL, bytes.NewReader(body))
		req.Header = s.Sign(id, time.Now(), body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadFull(resp.Body, make([]byte, chunk)) // some of it, then hang up
		_ = resp.Body.Close()
		select {
		case <-finished:
		case <-time.After(20 * time.Second):
			t.Fatal("the upstream's answer did not end")
		}
		mu.Lock()
		if writeErr != nil {
			t.Errorf("the upstream's copy was cut off (%v); want it read to its end", writeErr)
		}
		mu.Unlock()
		// The upstream's last write is not the gateway's record: until the
		// gateway has read the end and recorded, a retry is 409 in_flight,
		// as a sender's retry would be; it retries, as a sender does.
		st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), body), body)
		for deadline := time.Now().Add(10 * time.Second); st == 409 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			st, hdr, got = post(t, g.URL, s.Sign(id, time.Now(), body), body)
		}
		if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || hdr.Get("Idempotent-Body-Omitted") != "true" || len(got) != 0 {
			t.Fatalf("retry: %d replayed %q omitted %q; want the 200 replayed without its body", st, hdr.Get("Idempotent-Replayed"), hdr.Get("Idempotent-Body-Omitted"))
		}
		if up.count() != 1 {
			t.Fatalf("upstream received %d copies, want 1", up.count())
		}
	})
}

// TestForwardOutlivesItsDeadline: the upstream sends its status, then
// stalls past the forward's deadline (the lease, less a margin). The
// status is recorded without the body, the client gets 504
// upstream_timeout, and the retry is replayed.
func TestForwardOutlivesItsDeadline(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		release := make(chan struct{})
		up := newRawUpstream(t, func(_ int, _ *http.Request, _ []byte, c net.Conn) bool {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n")
			<-release
			return false
		})
		t.Cleanup(func() { close(release) }) // before the upstream's cleanup waits for it
		g := startGateway(t, dedupeSite(up.Addr(), "lease 2s"), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		body := []byte(`{"type":"reservation.confirmed"}`)
		id := randomID("msg_")
		st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if st != 504 || problemBody(t, st, hdr, got) != "upstream_timeout" {
			t.Fatalf("stalled answer: %d %s; want 504 upstream_timeout", st, got)
		}
		st, hdr, _ = post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || hdr.Get("Idempotent-Body-Omitted") != "true" {
			t.Fatalf("retry: %d replayed %q; want the 200 replayed without its body", st, hdr.Get("Idempotent-Replayed"))
		}
		if n := up.count(id); n != 1 {
			t.Fatalf("upstream received %d copies, want 1", n)
		}
	})
}

// TestFreshnessForwardSettles: without dedupe, a truncated 2xx answer
// still applied the event: the watermark moves and the entity's lease is
// released at once, so the next event of the entity is forwarded without
// waiting and an older one is stale.
func TestFreshnessForwardSettles(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		var first sync.Once
		up := newRawUpstream(t, func(_ int, _ *http.Request, _ []byte, c net.Conn) bool {
			truncated := false
			first.Do(func() { truncated = true })
			if truncated {
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"applied")
				return false
			}
			answer200(c, `{"applied":true}`)
			return true
		})
		site := fmt.Sprintf(`
	webhook_verify {
		secret %s
	}
	webhook_freshness {
		entity {webhook.json.reservation_id}
		event_time {webhook.json.occurred_at}
		entity_busy reject
	}
	reverse_proxy %s`, devSecret, up.Addr())
		g := startGateway(t, site, gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		r := randomID("r-")
		t0 := time.Now().Add(-time.Minute)
		a := event("reservation.confirmed", r, t0)
		req, _ := http.NewRequest(http.MethodPost, g.URL, bytes.NewReader(a))
		req.Header = s.Sign(randomID("msg_"), time.Now(), a)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err == nil {
				t.Fatalf("a truncated answer reached the client whole: %d", resp.StatusCode)
			}
		}
		newer := event("reservation.cancelled", r, t0.Add(time.Second))
		if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), newer), newer); st != 200 || !strings.Contains(string(got), "applied") {
			t.Fatalf("the next event of the entity: %d %s; want it forwarded at once", st, got)
		}
		older := event("reservation.expired", r, t0.Add(-time.Second))
		if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), older), older); st != 200 || !strings.Contains(string(got), `"stale"`) {
			t.Fatalf("an event older than the truncated one: %d %s; want stale", st, got)
		}
		if n := up.requests(); n != 2 {
			t.Fatalf("upstream received %d requests, want 2", n)
		}
	})
}

// TestOneForwardOneSend: the upstream reads a request on a reused
// connection, then closes it without answering. Go's transport would
// resend a request carrying an Idempotency-Key on a fresh connection, so
// the upstream would apply it twice; the forward must be sent once.
func TestOneForwardOneSend(t *testing.T) {
	up := newRawUpstream(t, func(n int, _ *http.Request, _ []byte, c net.Conn) bool {
		if n == 2 {
			return false // read it, then close the reused connection
		}
		answer200(c, `{"ok":true}`)
		return true
	})
	g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})
	s := signer(t, "standard", devSecret)
	for _, tt := range []struct{ name, body string }{{"with a body", `{"n":1}`}, {"empty body", ``}} {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			if st, _, got := post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), body), body); st != 200 {
				t.Fatalf("first delivery: %d %s", st, got) // leaves a connection to reuse
			}
			id := randomID("msg_")
			h := s.Sign(id, time.Now(), body)
			h.Set("Idempotency-Key", id)
			h.Set("X-Idempotency-Key", id)
			st, _, _ := post(t, g.URL, h, body)
			if n := up.count(id); n != 1 {
				t.Fatalf("upstream received the delivery %d times, want once (answer %d)", n, st)
			}
			if st != 502 {
				t.Errorf("status %d, want 502: the upstream closed without answering", st)
			}
		})
	}
}

// TestUnresolvedPlaceholdersAreNeverKeys: without webhook_verify in front,
// {webhook.id} is unknown. It must not become one literal key shared by
// every request (the second delivery replayed the first's answer); the
// same goes for freshness's entity.
func TestUnresolvedPlaceholdersAreNeverKeys(t *testing.T) {
	up := newUpstream(t, nil)
	site := fmt.Sprintf(`
	route /dedupe {
		webhook_dedupe
		reverse_proxy %[1]s
	}
	route /fresh {
		webhook_freshness {
			entity {http.request.header.X-Reservation}
			event_time {webhook.json.occurred_at}
		}
		reverse_proxy %[1]s
	}`, up.Addr())
	g := startGateway(t, site, gatewayOptions{})
	for _, body := range []string{`{"a":1}`, `{"a":2}`} {
		st, hdr, got := post(t, g.URL+"/dedupe", nil, []byte(body))
		if st != 400 || problemBody(t, st, hdr, got) != "missing_idempotency_key" {
			t.Fatalf("no webhook_verify in front: %d %s; want 400 missing_idempotency_key", st, got)
		}
	}
	ev := event("reservation.confirmed", "r-1", time.Now())
	st, hdr, got := post(t, g.URL+"/fresh", nil, ev)
	if st != 400 || problemBody(t, st, hdr, got) != "missing_entity" {
		t.Fatalf("no X-Reservation header: %d %s; want 400 missing_entity", st, got)
	}
	if up.count() != 0 {
		t.Fatalf("upstream received %d requests, want 0", up.count())
	}
	// Alone, freshness reads the body itself, so {webhook.json.*} resolves.
	if st, _, got := post(t, g.URL+"/fresh", http.Header{"X-Reservation": {"r-1"}}, ev); st != 200 || up.count() != 1 {
		t.Fatalf("with the entity header: %d %s; want forwarded", st, got)
	}
}

// TestOversizedKeys: a 2 KiB delivery ID or entity is a precise 400, not a
// store error retried for ever.
func TestOversizedKeys(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, nil)
		g := startGateway(t, freshSite(up.Addr(), ""), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		long := strings.Repeat("k", 2048)
		body := event("reservation.confirmed", "r-1", time.Now())
		st, hdr, got := post(t, g.URL, s.Sign(long, time.Now(), body), body)
		if st != 400 || problemBody(t, st, hdr, got) != "idempotency_key_too_long" || bytes.Contains(got, []byte(long)) {
			t.Fatalf("2 KiB delivery ID: %d %s; want 400 idempotency_key_too_long, without the key", st, got)
		}
		body = event("reservation.confirmed", long, time.Now())
		st, hdr, got = post(t, g.URL, s.Sign(randomID("msg_"), time.Now(), body), body)
		if st != 400 || problemBody(t, st, hdr, got) != "entity_too_long" {
			t.Fatalf("2 KiB entity: %d %s; want 400 entity_too_long", st, got)
		}
		if up.count() != 0 {
			t.Fatalf("upstream received %d requests, want 0", up.count())
		}
	})
}

// TestBodyOnlySchemesKeyByBody: github and shopify sign neither the ID
// nor a time. A captured request re-sent under fresh delivery IDs must be
// a duplicate, and a captured body sent first under a genuine delivery's
// future ID must not make that delivery a 422.
func TestBodyOnlySchemesKeyByBody(t *testing.T) {
	for _, scheme := range []string{"github", "shopify"} {
		t.Run(scheme, func(t *testing.T) {
			up := newUpstream(t, nil)
			site := fmt.Sprintf(`
	webhook_verify %s {
		secret It's-a-secret
	}
	webhook_dedupe
	reverse_proxy %s`, scheme, up.Addr())
			g := startGateway(t, site, gatewayOptions{})
			s := signer(t, scheme, "It's-a-secret")
			idHeader := map[string]string{"github": "X-GitHub-Delivery", "shopify": "X-Shopify-Webhook-Id"}[scheme]

			captured := []byte(`{"action":"enroll","seat":7}`)
			h := s.Sign("d-1", time.Time{}, captured)
			for i := range 4 {
				h.Set(idHeader, fmt.Sprintf("d-%d", i+1)) // the attacker's fresh IDs
				st, hdr, _ := post(t, g.URL, h, captured)
				if st != 200 || (i > 0) != (hdr.Get("Idempotent-Replayed") == "true") {
					t.Fatalf("copy %d under a fresh ID: %d replayed %q", i+1, st, hdr.Get("Idempotent-Replayed"))
				}
			}
			if up.count() != 1 {
				t.Fatalf("a captured request under 4 IDs was applied %d times, want 1", up.count())
			}

			// The attacker squats the ID of a genuine delivery to come.
			h.Set(idHeader, "d-genuine")
			post(t, g.URL, h, captured)
			genuine := []byte(`{"action":"enroll","seat":8}`)
			st, _, got := post(t, g.URL, s.Sign("d-genuine", time.Time{}, genuine), genuine)
			if st != 200 {
				t.Fatalf("the genuine delivery under a squatted ID: %d %s; want it forwarded", st, got)
			}
			if up.count() != 2 {
				t.Fatalf("upstream received %d requests, want 2", up.count())
			}
		})
	}
}

// TestStrictHeadersEndToEnd: a second, unsigned webhook-id beside the
// signed one, or a non-canonical timestamp, is 400 malformed_header; and
// with record 2xx 4xx, freshness's clock-dependent event_time_in_future is
// never recorded.
func TestStrictHeadersEndToEnd(t *testing.T) {
	up := newUpstream(t, nil)
	site := fmt.Sprintf(`
	webhook_verify {
		secret %s
	}
	webhook_dedupe {
		record 2xx 4xx
	}
	webhook_freshness {
		entity {webhook.json.reservation_id}
		event_time {webhook.json.occurred_at}
	}
	reverse_proxy %s`, devSecret, up.Addr())
	g := startGateway(t, site, gatewayOptions{})
	s := signer(t, "standard", devSecret)
	body := event("reservation.confirmed", randomID("r-"), time.Now())
	h := s.Sign(randomID("msg_"), time.Now(), body)
	h.Add("Webhook-Id", "msg_unsigned")
	if st, hdr, got := post(t, g.URL, h, body); st != 400 || problemBody(t, st, hdr, got) != "malformed_header" {
		t.Fatalf("two webhook-id headers: %d %s; want 400 malformed_header", st, got)
	}
	h = s.Sign(randomID("msg_"), time.Now(), body)
	h.Set("Webhook-Timestamp", "+"+h.Get("Webhook-Timestamp"))
	if st, hdr, got := post(t, g.URL, h, body); st != 400 || problemBody(t, st, hdr, got) != "malformed_header" {
		t.Fatalf("timestamp +<ts>: %d %s; want 400 malformed_header", st, got)
	}

	future := event("reservation.confirmed", randomID("r-"), time.Now().Add(10*time.Minute))
	id := randomID("msg_")
	for range 2 {
		st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), future), future)
		if st != 400 || problemBody(t, st, hdr, got) != "event_time_in_future" || hdr.Get("Idempotent-Replayed") != "" {
			t.Fatalf("future event: %d %s replayed %q; want 400 event_time_in_future, judged afresh", st, got, hdr.Get("Idempotent-Replayed"))
		}
	}
	if up.count() != 0 {
		t.Fatalf("upstream received %d requests, want 0", up.count())
	}
}

// TestChunkedResponsesStreamPastMaxRecord: a response without a
// Content-Length is buffered only up to max_record, then streams: the
// client gets the first bytes while the upstream is still writing (before,
// the whole answer was held in memory). It is recorded without its body;
// a small chunked answer is recorded whole.
func TestChunkedResponsesStreamPastMaxRecord(t *testing.T) {
	more := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if bytes.Contains(body, []byte("small")) {
			_, _ = w.Write([]byte(`{"small":true}`))
			w.(http.Flusher).Flush()
			return
		}
		_, _ = w.Write(bytes.Repeat([]byte("a"), 64<<10))
		w.(http.Flusher).Flush() // no Content-Length: chunked
		select {
		case <-more:
		case <-time.After(20 * time.Second):
		}
		_, _ = w.Write([]byte("end"))
	})
	g := startGateway(t, dedupeSite(up.Addr(), "max_record 1KiB"), gatewayOptions{})
	s := signer(t, "standard", devSecret)
	body := []byte(`{"large":true}`)
	id := randomID("msg_")
	req, _ := http.NewRequest(http.MethodPost, g.URL, bytes.NewReader(body))
	req.Header = s.Sign(id, time.Now(), body)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("no response while the upstream still writes (buffered whole?): %v", err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatalf("reading the first 64 KiB while the upstream still writes: %v", err)
	}
	close(more)
	rest, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(rest) != "end" {
		t.Fatalf("the rest of the body = %q, want end", rest)
	}
	st, hdr, _ := post(t, g.URL, s.Sign(id, time.Now(), body), body)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || hdr.Get("Idempotent-Body-Omitted") != "true" {
		t.Fatalf("retry of the large answer: %d replayed %q omitted %q", st, hdr.Get("Idempotent-Replayed"), hdr.Get("Idempotent-Body-Omitted"))
	}

	small := []byte(`{"small":true}`)
	id = randomID("msg_")
	post(t, g.URL, s.Sign(id, time.Now(), small), small)
	st, hdr, got := post(t, g.URL, s.Sign(id, time.Now(), small), small)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || string(got) != `{"small":true}` {
		t.Fatalf("retry of the small chunked answer: %d replayed %q %q; want it replayed whole", st, hdr.Get("Idempotent-Replayed"), got)
	}
}

// TestSetCookieIsNeverReplayed: a cookie the upstream set is one
// client's; a replay must not hand it to another.
func TestSetCookieIsNeverReplayed(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "first-client"})
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})
	s := signer(t, "standard", devSecret)
	body := []byte(`{"n":1}`)
	id := randomID("msg_")
	if _, hdr, _ := post(t, g.URL, s.Sign(id, time.Now(), body), body); hdr.Get("Set-Cookie") == "" {
		t.Fatal("the first answer lost its Set-Cookie")
	}
	st, hdr, _ := post(t, g.URL, s.Sign(id, time.Now(), body), body)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || hdr.Get("Set-Cookie") != "" {
		t.Fatalf("replay: %d replayed %q Set-Cookie %q; want no cookie", st, hdr.Get("Idempotent-Replayed"), hdr.Get("Set-Cookie"))
	}
}
