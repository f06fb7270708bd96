package problem

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	for _, tt := range []struct {
		retry time.Duration
		want  string
	}{{0, ""}, {time.Millisecond, "1"}, {1500 * time.Millisecond, "2"}, {30 * time.Second, "30"}} {
		w := httptest.NewRecorder()
		Write(w, InFlight, "a copy is in flight", tt.retry)
		if w.Header().Get("Retry-After") != tt.want {
			t.Errorf("retry %s: Retry-After = %q, want %q", tt.retry, w.Header().Get("Retry-After"), tt.want)
		}
		var p Details
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != 409 || p.Reason != "in_flight" {
			t.Errorf("body %s: %+v %v", w.Body.Bytes(), p, err)
		}
		if w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("Content-Type = %q", w.Header().Get("Content-Type"))
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{{"", 3, ""}, {"abc", 3, "abc"}, {"abcd", 3, "abc…"}} {
		if got := Truncate(tt.s, tt.n); got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
