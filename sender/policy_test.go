package sender

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.UnixMilli(1_800_000_000_000)

func TestClassify(t *testing.T) {
	ra := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	tests := []struct {
		name   string
		status int
		header http.Header
		err    error
		want   Result
	}{
		{"2xx", 204, nil, nil, Result{Delivered: true}},
		{"network", 0, nil, errors.New("connection refused"), Result{Class: ClassNetwork, Transient: true, Breaker: BreakerFailure}},
		{"deadline", 0, nil, fmt.Errorf("post: %w", context.DeadlineExceeded), Result{Class: ClassTimeout, Transient: true, Breaker: BreakerFailure}},
		{"our timeout", 0, nil, errTimeout, Result{Class: ClassTimeout, Transient: true, Breaker: BreakerFailure}},
		{"request", 0, nil, &requestError{errors.New(`invalid header field value for "Webhook-Id"`)}, Result{Class: ClassRequest, Breaker: BreakerNotCounted}},
		{"503", 503, ra("7"), nil, Result{Class: ClassHTTP5xx, Transient: true, Breaker: BreakerFailure, RetryAfter: 7 * time.Second}},
		{"429 date", 429, ra(t0.Add(90 * time.Second).UTC().Format(http.TimeFormat)), nil, Result{Class: ClassHTTP4xx, Transient: true, Breaker: BreakerFailure, RetryAfter: 90 * time.Second}},
		{"429 past int64", 429, ra("99999999999999999999"), nil, Result{Class: ClassHTTP4xx, Transient: true, Breaker: BreakerFailure, RetryAfter: maxRetryAfter}},
		{"429 past the longest", 429, ra("9999999999"), nil, Result{Class: ClassHTTP4xx, Transient: true, Breaker: BreakerFailure, RetryAfter: maxRetryAfter}},
		{"429 negative", 429, ra("-5"), nil, Result{Class: ClassHTTP4xx, Transient: true, Breaker: BreakerFailure}},
		{"408", 408, nil, nil, Result{Class: ClassHTTP4xx, Transient: true, Breaker: BreakerFailure}},
		{"425", 425, nil, nil, Result{Class: ClassHTTP4xx, Transient: true, Breaker: BreakerFailure}},
		{"hookgate in_flight", 409, ra("3"), nil, Result{Class: ClassHTTP4xx, Transient: true, Breaker: BreakerNotCounted, RetryAfter: 3 * time.Second}},
		{"plain 409", 409, nil, nil, Result{Class: ClassHTTP4xx}},
		{"400", 400, nil, nil, Result{Class: ClassHTTP4xx}},
		{"410", 410, nil, nil, Result{Class: ClassGone, Pause: true}},
		{"301", 301, http.Header{"Location": {"/elsewhere"}}, nil, Result{Class: ClassHTTP3xx}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			if diff := cmp.Diff(tt.want, Classify(tt.status, h, tt.err, t0)); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBackoffBounds: the wait after the n-th failed delivery lies in
// [0, min(cap, base·2^(n-1))], at both ends of the random source, and a
// Retry-After is honoured within the cap.
func TestBackoffBounds(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999999} {
		b := Backoff{Base: 2 * time.Second, Cap: 15 * time.Minute, Rand: func() float64 { return r }}
		for n := 1; n <= 100; n++ {
			ceiling := 15 * time.Minute
			if n <= 20 {
				ceiling = min(ceiling, 2*time.Second<<(n-1))
			}
			got := b.Delay(n, 0)
			if got < 0 || got > ceiling {
				t.Fatalf("r=%v n=%d: delay %v outside [0, %v]", r, n, got, ceiling)
			}
			if want := time.Duration(r * float64(ceiling)); got != want {
				t.Fatalf("r=%v n=%d: delay %v, want %v", r, n, got, want)
			}
		}
		if got := b.Delay(1, time.Minute); got != time.Minute {
			t.Errorf("Retry-After 1m after the first failure: %v, want 1m", got)
		}
		if got := b.Delay(1, time.Hour); got != 15*time.Minute {
			t.Errorf("Retry-After 1h: %v, want the 15m cap", got)
		}
		if got := b.Delay(1, retryAfter("99999999999999999999", t0)); got != 15*time.Minute {
			t.Errorf("Retry-After past int64: %v, want the 15m cap", got)
		}
	}
}

// TestClassNumbersAreKept: a class's number is stored with each envelope,
// so the classes keep their numbers and names; request came last.
func TestClassNumbersAreKept(t *testing.T) {
	want := []string{"network", "timeout", "http_5xx", "http_4xx", "http_3xx", "gone", "request"}
	if diff := cmp.Diff(want, Classes()); diff != "" {
		t.Errorf("Classes (-want +got):\n%s", diff)
	}
	for i, name := range want {
		c, err := ParseClass(name)
		if err != nil || c != Class(i+1) || c.String() != name {
			t.Errorf("ParseClass(%q) = %d %v, want %d", name, c, err, i+1)
		}
	}
	if ClassRequest != 7 {
		t.Errorf("ClassRequest = %d, want 7", ClassRequest)
	}
}

func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"msg_1", true},
		{"reconcile:r-1:confirmed:3", true},
		{"!~", true},
		{strings.Repeat("a", 1024), true},
		{"", false},
		{strings.Repeat("a", 1025), false},
		{"a b", false},
		{"a\r\nX-Evil: 1", false},
		{"a\x00", false},
		{"a\x7f", false},
		{"é", false},
	} {
		err := CheckID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("CheckID(%q) = %v, want ok %v", tc.id, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadID) {
			t.Errorf("CheckID(%q) = %v, not ErrBadID", tc.id, err)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"50/s": 50, "600/m": 10, "3600/h": 1, "0.5/s": 0.5} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "50", "50/d", "0/s", "-1/s", "x/s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q): no error", in)
		}
	}
}
