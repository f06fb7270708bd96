package verify

// The token schemes: providers that sign nothing, but send a shared
// secret with each request (a header, HTTP basic auth, or a field of the
// body), which hookgate compares with the configured ones in constant
// time. A token proves the sender and nothing of the body or its age: a
// captured request can be replayed, which dedupe (keyed by the body)
// stops once it has seen it.

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"time"
)

// tokenScheme is one provider's token: in a header (or, with basic, the
// password of HTTP basic auth, its secret written user:password), or in
// the JSON body (body reads it there).
type tokenScheme struct {
	named string
	in    string // the header
	basic bool
	// body reads the tokens of a JSON body: every one must be a secret.
	// It decodes as encoding/json does (the last of duplicate keys, as
	// the service behind reads them), and refuses what is not JSON.
	body func([]byte) ([]string, error)
	// where names the token in the body, for errors and hookgate sign.
	where string
}

func (s tokenScheme) name() string                     { return s.named }
func (tokenScheme) defaultFuture() time.Duration       { return DefaultTolerance }
func (tokenScheme) key(secret string) ([]byte, error)  { return []byte(secret), nil }
func (tokenScheme) mac(hash.Hash, parsed, []byte)      {}
func (tokenScheme) header(http.Header, parsed, []byte) {}

// maxTokens bounds the tokens of one body (Microsoft Graph's batch), and
// maxToken a token's length: no configured secret is longer.
const (
	maxTokens = 1000
	maxToken  = 4096
)

// figmaPasscode reads Figma's passcode.
func figmaPasscode(body []byte) ([]string, error) {
	var v struct {
		Passcode *string `json:"passcode"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Passcode == nil {
		return nil, errors.New("the body holds no passcode")
	}
	return []string{*v.Passcode}, nil
}

// graphClientStates reads the clientState of each of Microsoft Graph's
// notifications: every one must carry it, or one without it would ride
// along with a genuine one. A JSON array decoded into a fresh slice gets
// fresh elements: of duplicate keys within one, the last counts.
func graphClientStates(body []byte) ([]string, error) {
	// Through a map first: a second "value" replaces the first whole,
	// where decoding into a struct would merge the two arrays' elements.
	var top map[string]json.RawMessage
	var value []struct {
		ClientState *string `json:"clientState"`
	}
	if err := json.Unmarshal(body, &top); err != nil || json.Unmarshal(top["value"], &value) != nil || len(value) == 0 {
		return nil, errors.New("the body holds no notification in its value")
	}
	if len(value) > maxTokens {
		return nil, fmt.Errorf("the body holds over %d notifications", maxTokens)
	}
	out := make([]string, len(value))
	for i, n := range value {
		if n.ClientState == nil {
			return nil, errors.New("a notification of the body holds no clientState")
		}
		out[i] = *n.ClientState
	}
	return out, nil
}

// headerToken reads the token of a header scheme.
func (s tokenScheme) headerToken(h http.Header) (string, error) {
	vals, err := headers(h, s.in)
	if err != nil {
		return "", err
	}
	v := vals[0]
	if s.basic {
		if len(v) < 6 || !strings.EqualFold(v[:6], "Basic ") {
			return "", malformed(s.in, "is not HTTP basic auth")
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(v[6:])
		if err != nil {
			return "", malformed(s.in, "is not HTTP basic auth")
		}
		v = string(raw)
	}
	if len(v) > maxToken {
		return "", malformed(s.in, "is longer than any token")
	}
	return v, nil
}

// parse checks that a header scheme's header is there (a missing one is
// ErrMissingHeader); verifyTokens reads the tokens.
func (s tokenScheme) parse(r Request) (parsed, error) {
	if s.body == nil {
		if _, err := s.headerToken(r.Header); err != nil {
			return parsed{}, err
		}
	}
	return parsed{}, nil
}

// verifyTokens reports whether every token of r is one of v's secrets,
// and which secret the first is. Tokens and secrets are compared by their
// SHA-256, in constant time: neither a secret's length nor where a
// mismatch lies shows in the time taken.
func (v *Verifier) verifyTokens(s tokenScheme, r Request) (int, bool) {
	var toks []string
	if s.body != nil {
		var err error
		if toks, err = s.body(r.Body); err != nil {
			return -1, false
		}
	} else {
		tok, err := s.headerToken(r.Header)
		if err != nil {
			return -1, false
		}
		toks = []string{tok}
	}
	first, all := -1, 1
	for _, t := range toks {
		sum := sha256.Sum256([]byte(t))
		found := 0
		for i, k := range v.keys {
			ks := sha256.Sum256(k)
			eq := subtle.ConstantTimeCompare(sum[:], ks[:])
			if eq == 1 && first < 0 {
				first = i
			}
			found |= eq
		}
		all &= found
	}
	return first, all == 1 && first >= 0
}

// tokenHeaders is what a sender of s adds: the first secret, in its
// header. A body's token is the sender's to write: hookgate sign says so.
func (v *Verifier) tokenHeaders(s tokenScheme) (http.Header, error) {
	h := make(http.Header)
	switch {
	case s.body != nil:
		return nil, fmt.Errorf("%s's token is in the body: write the secret as its %s", s.named, s.where)
	case s.basic:
		h.Set(s.in, "Basic "+base64.StdEncoding.EncodeToString(v.keys[0]))
	default:
		h.Set(s.in, string(v.keys[0]))
	}
	return h, nil
}
