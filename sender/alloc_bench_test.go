package sender

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// okTransport answers every request 200 at once, without a network: what
// an attempt costs the sender itself. Its answer is one allocation, as a
// real transport's response is.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: okHeader, Body: http.NoBody, Request: r}, nil
}

var okHeader = http.Header{"Content-Length": {"0"}}

// attemptAllocs is the allocation budget of one signed attempt that
// delivers (BenchmarkAttempt), the request, its header and the fake
// transport's answer included.
const attemptAllocs = 50

// BenchmarkAttempt is one attempt of a leased envelope that its receiver
// accepts, signed with the standard scheme, on a fake transport: the
// sender's own cost per delivery, between the lease and the settlement.
// It fails when an attempt allocates more than attemptAllocs.
func BenchmarkAttempt(b *testing.B) {
	signer, err := verify.New("standard", []string{"whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA=="}, verify.Options{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(nil, Config{Workers: 20}, []Destination{{Name: "bench", URL: "http://127.0.0.1:1/hooks", Signer: signer, Workers: 20}},
		Options{Transport: okTransport{}})
	if err != nil {
		b.Fatal(err)
	}
	d, _ := s.dest("bench")
	payload := []byte(`{"type":"reservation.confirmed","data":"` + strings.Repeat("x", 500-44) + `"}`)
	now := time.Now()
	e := &Envelope{ID: "evt_00000001", Destination: "bench", EventType: "reservation.confirmed", CreatedAt: now, NextAt: now, Payload: payload}
	ctx := context.Background()
	one := func() {
		e.Log, e.Attempts = nil, 0 // as leased
		j := job{Leased{Envelope: e, LeaseUntil: now}, time.Now().Add(s.cfg.Lease)}
		if o := s.deliver(ctx, d, j); o.Kind != Delivered {
			b.Fatalf("outcome %d, want delivered (%s)", o.Kind, e.LastError)
		}
	}
	if n := testing.AllocsPerRun(100, one); n > attemptAllocs {
		b.Fatalf("an attempt allocates %.0f times; the budget is %d", n, attemptAllocs)
	}
	b.ReportAllocs()
	for b.Loop() {
		one()
	}
}
