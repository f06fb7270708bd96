package httpapi

import (
	"net/http"

	"github.com/hookgate/hookgate/sender"
)

// ReceivedView is what an envelope keeps of the request durable ingress
// accepted, as the admin API shows it: the "received" object of GET
// /hookgate/dlq/<id> and GET /hookgate/deliveries/<destination>/<id>.
type ReceivedView struct {
	// Source is the scheme that verified the request; "" when no
	// webhook_verify was in front.
	Source string `json:"source"`
	// Path is the kept path and query; "" without keep_path.
	Path string `json:"path"`
	// Headers are the kept headers by canonical name, their values in
	// the request's order, those of redact_headers masked.
	Headers http.Header `json:"headers"`
}

// ReceivedOf is r as shown: nil for nil (an envelope enqueued through the
// API, or one whose payload the history no longer keeps). The values
// redact_headers names are never shown (they are sent to the service as
// they came): only Shown is read.
func ReceivedOf(r *sender.Received) *ReceivedView {
	if r == nil {
		return nil
	}
	h := r.Shown()
	if h == nil {
		// An object, never null: a client ranges over it.
		h = http.Header{}
	}
	return &ReceivedView{Source: r.Source, Path: r.Path, Headers: h}
}
