package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// TestDedupeThroughSentinel runs dedupe on a Redis found through a
// Sentinel.
func TestDedupeThroughSentinel(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, master)
	up := newUpstream(t, nil)
	global := fmt.Sprintf("hookgate {\n\t\tstore redis redis://%s {\n\t\t\tsentinel_master mymaster\n\t\t}\n\t}", sentinel)
	g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{Global: global})
	body := []byte(`{"type":"reservation.confirmed"}`)
	h := signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body)
	post(t, g.URL, h, body)
	if st, hdr, _ := post(t, g.URL, h, body); st != 200 || hdr.Get("Idempotent-Replayed") != "true" || up.count() != 1 {
		t.Fatalf("duplicate through Sentinel: %d replayed %q upstream %d", st, hdr.Get("Idempotent-Replayed"), up.count())
	}
}

// TestDedupeOnStoreErrorForward checks the opt-in: with the store down,
// requests are forwarded unprotected instead of refused.
func TestDedupeOnStoreErrorForward(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, nil)
	g := startGateway(t, dedupeSite(up.Addr(), "on_store_error forward"), gatewayOptions{Global: redisGlobal(srv.URL())})
	srv.Stop()
	body := []byte(`{"type":"reservation.confirmed"}`)
	st, _, got := post(t, g.URL, signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body), body)
	if st != 200 || up.count() != 1 {
		t.Fatalf("store down, on_store_error forward: %d %s, upstream %d; want forwarded", st, got, up.count())
	}
	if m := g.Metrics(); !strings.Contains(m, `hookgate_dedupe_requests_total{result="store_error"} 1`) {
		t.Errorf("store_error not counted:\n%s", grepLines(m, "hookgate_dedupe"))
	}
}

// TestReloadKeepsTheStore reloads the config through the admin API: the new
// config reuses the open bbolt file (it would time out on the file's lock
// otherwise) and sees what the old one recorded.
func TestReloadKeepsTheStore(t *testing.T) {
	up := newUpstream(t, nil)
	site := dedupeSite(up.Addr(), "")
	g := startGateway(t, site, gatewayOptions{})
	body := []byte(`{"type":"reservation.confirmed"}`)
	h := signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body)
	post(t, g.URL, h, body)

	// The running config, changed a little so Caddy does not skip the load.
	port := strings.TrimPrefix(g.URL, "http://127.0.0.1:")
	admin := strings.TrimPrefix(g.Admin, "http://")
	caddyfile := fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n}\nhttp://127.0.0.1:%s {\n\theader X-Reloaded yes\n%s\n}\n", admin, port, site)
	req, _ := http.NewRequest(http.MethodPost, g.Admin+"/load", bytes.NewReader([]byte(caddyfile)))
	req.Header.Set("Content-Type", "text/caddyfile")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %d", resp.StatusCode)
	}
	// The old server closes its idle connections; a POST is not retried on
	// one that closes under it, so start afresh. A connection the old
	// server accepted while it shut down can still close under the
	// request (seen once on a busy machine: EOF): the copy is sent again,
	// which dedupe makes safe, as a provider's retry would.
	http.DefaultClient.CloseIdleConnections()
	st, hdr := 0, http.Header(nil)
	for try := range 3 {
		req, _ := http.NewRequest(http.MethodPost, g.URL, bytes.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if try == 2 {
				t.Fatalf("after reload: %v", err)
			}
			http.DefaultClient.CloseIdleConnections()
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		st, hdr = resp.StatusCode, resp.Header
		break
	}
	if st != 200 || hdr.Get("X-Reloaded") != "yes" || hdr.Get("Idempotent-Replayed") != "true" || up.count() != 1 {
		t.Fatalf("after reload: %d reloaded %q replayed %q upstream %d; want the new config replaying the old record",
			st, hdr.Get("X-Reloaded"), hdr.Get("Idempotent-Replayed"), up.count())
	}
}
