// Package problem writes RFC 9457 problem details with hookgate's reason
// code: every rejection the gateway, the admin API and the console make.
package problem

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Details is an RFC 9457 problem details body with hookgate's reason code.
type Details struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Reason string `json:"reason"`
}

// Write answers with an application/problem+json rejection for reason,
// at its status. A positive retryAfter sets Retry-After in whole seconds,
// rounded up, at least 1. detail must hold no secret, signature or body.
func Write(w http.ResponseWriter, reason Reason, detail string, retryAfter time.Duration) {
	status := reason.Status
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds(retryAfter)))
	}
	body, _ := json.Marshal(Details{
		Type:   "about:blank",
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Reason: reason.Code,
	})
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n')) // a client gone away has nothing to be told
}

// RetryAfterSeconds rounds d up to whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// Truncate shortens s to its first n bytes and an ellipsis, for quoting a
// value the client chose in a detail, or a long one in a table.
func Truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
