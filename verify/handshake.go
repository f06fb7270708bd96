package verify

import (
	"net/http"
	"time"
)

// Answer is the gateway's own answer to a provider's endpoint handshake.
type Answer struct {
	// Status is the HTTP status.
	Status int
	// Header holds the answer's headers (Content-Type among them).
	Header http.Header
	// Body is the answer's body; for a refusal (Reason set), the
	// problem's detail.
	Body []byte
	// Reason is the problem+json reason code of a refusal; empty for an
	// answer that completes the handshake.
	Reason string
}

// Handshake answers r when it is an endpoint handshake this Verifier's
// scheme and options take part in; ok is false for any other request,
// which Verify then judges.
func (v *Verifier) Handshake(r Request, now time.Time) (a Answer, ok bool) {
	return Answer{}, false
}
