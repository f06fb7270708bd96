package sender_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/verify"
)

// TestRotation: a destination with a previous secret sends both
// signatures until the previous one expires, then the new one only; a
// receiver that knows only the old secret verifies the first and
// refuses the second.
func TestRotation(t *testing.T) {
	const previous = "whsec_c2Vjb25kIHNlY3JldCBmb3Igcm90YXRpb24="
	rcv := newReceiver(t, func(string, int) int { return 200 })
	old, err := verify.New("standard", []string{previous}, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(2 * time.Minute) // the receiver checks its timestamps by the wall clock
	var now atomic.Int64
	now.Store(until.Add(-time.Minute).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	s, err := sender.New(newQueue(t), fast, []sender.Destination{{Name: "d", URL: rcv.URL, Signer: signer(t), Previous: old, PreviousUntil: until}},
		sender.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	enqueue(t, s, "d", "msg_before")
	eventually(t, "delivered before the previous secret expires", func() bool { return rcv.total.Load() >= 1 })
	now.Store(until.Add(time.Second).UnixNano())
	enqueue(t, s, "d", "msg_after")
	eventually(t, "delivered after", func() bool { return rcv.total.Load() >= 2 })

	for i, want := range []int{2, 1} {
		rcv.mu.Lock()
		h := rcv.hdrs[i]
		rcv.mu.Unlock()
		body := []byte(`{"id":"` + []string{"msg_before", "msg_after"}[i] + `"}`)
		if n := len(strings.Fields(h.Get("Webhook-Signature"))); n != want {
			t.Fatalf("request %d carries %d signatures, want %d: %q", i+1, n, want, h.Get("Webhook-Signature"))
		}
		_, err := old.Verify(verify.Request{Header: h, Body: body}, clock())
		if (err == nil) != (i == 0) {
			t.Fatalf("request %d under the previous secret alone: %v", i+1, err)
		}
	}
}
