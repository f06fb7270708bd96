package caddymodule

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// problem is an RFC 9457 problem details body with hookgate's reason code.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Reason string `json:"reason"`
}

// writeProblem answers with an application/problem+json rejection. A
// positive retryAfter sets Retry-After in whole seconds, rounded up, at
// least 1. detail must hold no secret, signature or body.
func writeProblem(w http.ResponseWriter, status int, reason, detail string, retryAfter time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(retryAfter)))
	}
	body, _ := json.Marshal(problem{
		Type:   "about:blank",
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Reason: reason,
	})
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
