package freshness

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/hookgate/hookgate/internal/problem"
)

// The answers to a stale event (ResultSuperseded, ResultTooOld):
// webhook_freshness's on_stale reject refuses it (Stale), on_stale ack
// acknowledges it (WriteStaleAck).

// Stale is the reason a stale judgement is refused with, and the detail
// that explains it.
func (f *Freshness) Stale(j Judgement) (problem.Reason, string) {
	if j.Result == ResultTooOld {
		return problem.TooOld, "the event is older than max_age " + f.cfg.MaxAge.String()
	}
	return problem.Superseded, "a newer event of this entity was already applied"
}

// WriteStaleAck acknowledges a stale event on w: 200
// {"status":"stale","reason":<result>}, so that the sender stops retrying
// it, and webhook_dedupe records the answer.
func WriteStaleAck(w http.ResponseWriter, result string) {
	body := fmt.Sprintf(`{"status":"stale","reason":%q}`+"\n", result)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(body)) // a client gone away has no one to tell
}
