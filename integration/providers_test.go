package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestProviderSchemesEndToEnd runs zoom, meta and twitter through the built
// binary: webhook_verify, webhook_dedupe and an upstream. None of the three
// signs a delivery ID, so dedupe keys them by the body: the same body again,
// even signed afresh, is replayed and reaches the upstream once; a changed
// body under the captured signature is 401, and so is a zoom request signed
// outside the tolerance.
func TestProviderSchemesEndToEnd(t *testing.T) {
	for _, scheme := range []string{"zoom", "meta", "twitter"} {
		t.Run(scheme, func(t *testing.T) {
			const secret = "provider-secret-0f3a"
			up := newUpstream(t, nil)
			g := startGateway(t, fmt.Sprintf(`
	webhook_verify %s {
		secret %s
	}
	webhook_dedupe
	reverse_proxy %s`, scheme, secret, up.Addr()), gatewayOptions{})
			s := signer(t, scheme, secret)

			body := []byte(`{"event":"meeting.started","payload":{"object":{"id":"` + randomID("m-") + `"}}}`)
			h := s.Sign("", time.Now(), body)
			if st, hdr, got := post(t, g.URL, h, body); st != 200 || hdr.Get("Idempotent-Replayed") != "" {
				t.Fatalf("a genuine request: %d %s replayed %q; want 200, forwarded", st, got, hdr.Get("Idempotent-Replayed"))
			}
			// The provider's retry (the same request), and the same body
			// signed a second later: one delivery.
			resigned := s.Sign("", time.Now().Add(time.Second), body)
			for i, again := range []http.Header{h, resigned} {
				st, hdr, got := post(t, g.URL, again, body)
				if st != 200 || hdr.Get("Idempotent-Replayed") != "true" {
					t.Fatalf("copy %d of the same body: %d %s replayed %q; want 200, replayed", i+1, st, got, hdr.Get("Idempotent-Replayed"))
				}
			}
			if up.count() != 1 {
				t.Fatalf("upstream received %d requests, want 1", up.count())
			}

			changed := append([]byte(nil), body...)
			changed[len(changed)-3] ^= 1
			if st, hdr, got := post(t, g.URL, h, changed); st != 401 || problemBody(t, st, hdr, got) != "bad_signature" {
				t.Fatalf("a changed body under the captured signature: %d %s; want 401 bad_signature", st, got)
			}
			other := []byte(`{"event":"meeting.ended","payload":{"object":{"id":"` + randomID("m-") + `"}}}`)
			if scheme == "zoom" {
				stale := s.Sign("", time.Now().Add(-10*time.Minute), other)
				if st, hdr, got := post(t, g.URL, stale, other); st != 401 || problemBody(t, st, hdr, got) != "timestamp_out_of_tolerance" {
					t.Fatalf("signed 10 minutes ago: %d %s; want 401 timestamp_out_of_tolerance", st, got)
				}
			}
			if up.count() != 1 {
				t.Fatalf("upstream received %d requests after the rejections, want 1", up.count())
			}
			if st, hdr, got := post(t, g.URL, s.Sign("", time.Now(), other), other); st != 200 || hdr.Get("Idempotent-Replayed") != "" {
				t.Fatalf("another genuine body: %d %s replayed %q; want 200, forwarded", st, got, hdr.Get("Idempotent-Replayed"))
			}
			if up.count() != 2 {
				t.Fatalf("upstream received %d requests, want 2", up.count())
			}
		})
	}
}
