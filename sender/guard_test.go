package sender_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookgate/hookgate/sender"
)

// TestGuardedDestination: a guarded destination's request to a refused
// address is never sent, though the sender's Transport dials TLS its
// own way (DialTLSContext would dial around the guard); it is
// dead-lettered at once, a request failure naming the rule. The same
// destination unguarded is delivered.
func TestGuardedDestination(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got.Add(1) }))
	defer srv.Close()
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&tls.Dialer{Config: tr.TLSClientConfig}).DialContext(ctx, network, addr)
	}
	for _, guard := range []bool{true, false} {
		q := newQueue(t)
		s, err := sender.New(q, fast, []sender.Destination{{Name: "d", URL: srv.URL, Signer: signer(t), Guard: guard}}, sender.Options{Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		enqueue(t, s, "d", "m")
		want := sender.StateDelivered
		if guard {
			want = sender.StateDead
		}
		eventually(t, "settled", func() bool {
			_, state, _ := q.Get(t.Context(), "d", "m")
			return state == want
		})
		stop()
		e, _, _ := q.Get(t.Context(), "d", "m")
		if guard && (e.Class != sender.ClassRequest || e.Attempts != 1 || !strings.Contains(e.LastError, "a loopback address: the SSRF guard refuses it")) {
			t.Fatalf("guarded: class %s, attempts %d, last error %q", e.Class, e.Attempts, e.LastError)
		}
	}
	if n := got.Load(); n != 1 {
		t.Fatalf("the receiver got %d requests, want the unguarded one only", n)
	}
}
