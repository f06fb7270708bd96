package freshness_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/internal/problem"
)

// TestStaleAnswers: a stale event is refused with the reason of its
// judgement, too_old naming max_age, or acknowledged with a 200 that
// names it.
func TestStaleAnswers(t *testing.T) {
	f, _ := newFreshness(t, freshness.Config{MaxAge: 90 * time.Minute})
	for result, want := range map[string]struct {
		reason problem.Reason
		detail string
	}{
		freshness.ResultSuperseded: {problem.Superseded, "a newer event of this entity was already applied"},
		freshness.ResultTooOld:     {problem.TooOld, "the event is older than max_age 1h30m0s"},
	} {
		reason, detail := f.Stale(freshness.Judgement{Result: result})
		if reason != want.reason || detail != want.detail {
			t.Errorf("Stale(%s) = %s, %q; want %s, %q", result, reason.Code, detail, want.reason.Code, want.detail)
		}
	}

	w := httptest.NewRecorder()
	freshness.WriteStaleAck(w, freshness.ResultTooOld)
	if w.Code != 200 || w.Body.String() != `{"status":"stale","reason":"too_old"}`+"\n" ||
		w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Content-Length") != "38" {
		t.Errorf("ack: %d %v %q", w.Code, w.Header(), w.Body.String())
	}
}
