package sender

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/hookgate/hookgate/verify"
)

// hopByHop are the headers a destination may not set: they belong to
// one connection, or to the request's framing, which the transport
// writes.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length"}

// CheckHeader reports why a destination may not send header name with
// value: a name or value that is not HTTP's, a hop-by-hop or framing
// header, or one the signer sets (its signature, timestamp and ID, which
// the receiver verifies). The value is never quoted: it may be a secret.
func CheckHeader(name, value string, signer Signer, url string) error {
	canon := http.CanonicalHeaderKey(name)
	switch {
	case !httpguts.ValidHeaderFieldName(name):
		return fmt.Errorf("header %q: not a header name", name)
	case !httpguts.ValidHeaderFieldValue(value):
		return fmt.Errorf("header %s: its value is not a valid header value", canon)
	case slices.Contains(hopByHop, canon):
		return fmt.Errorf("header %s: a hop-by-hop or framing header is the transport's, not a destination's", canon)
	case strings.HasPrefix(canon, "Hookgate-"):
		return fmt.Errorf("header %s: the Hookgate- headers are hookgate's own", canon)
	}
	if signer != nil {
		signed, err := signer.SignRequest(verify.Request{Method: http.MethodPost, URL: url, Header: http.Header{}, Body: []byte("{}")}, "id", time.Now())
		if _, sets := signed[canon]; err == nil && sets {
			return fmt.Errorf("header %s: the destination's scheme sets it, with the signature", canon)
		}
	}
	return nil
}

// secretHeaderWords are the words that make a header's value a secret to
// mask wherever it is shown.
var secretHeaderWords = []string{"secret", "token", "key", "authorization", "password", "cookie"}

// SecretHeader reports whether header name's value is to be masked
// wherever it is shown: its name says secret, token, key, authorization,
// password or cookie.
func SecretHeader(name string) bool {
	lower := strings.ToLower(name)
	return slices.ContainsFunc(secretHeaderWords, func(w string) bool { return strings.Contains(lower, w) })
}
