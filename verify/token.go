package verify

// The token schemes: providers that sign nothing, but send a shared
// secret with each request (a header, HTTP basic auth, or a field of the
// body), which hookgate compares with the configured one in constant
// time. A token proves the sender and nothing of the body or its age: a
// captured request can be replayed, which dedupe (keyed by the body)
// stops once it has seen it.

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// tokenScheme is one provider's token: in a header (or, with basic, the
// password of HTTP basic auth, its secret written user:password), or at
// field of a JSON body, each occurrence of which must hold it.
type tokenScheme struct {
	named string
	in    string // the header
	basic bool
	field string // a gjson path; # for every element of an array
}

func (s tokenScheme) name() string                     { return s.named }
func (tokenScheme) defaultFuture() time.Duration       { return DefaultTolerance }
func (tokenScheme) key(secret string) ([]byte, error)  { return []byte(secret), nil }
func (tokenScheme) mac(hash.Hash, parsed, []byte)      {}
func (tokenScheme) header(http.Header, parsed, []byte) {}

// maxToken bounds a token read: no configured secret is longer.
const maxToken = 4096

// tokens reads the request's tokens; each must match a secret.
func (s tokenScheme) tokens(r Request) ([][]byte, error) {
	if s.field != "" {
		res := gjson.GetBytes(r.Body, s.field)
		var out [][]byte
		add := func(v gjson.Result) {
			if v.Type == gjson.String && len(v.Str) <= maxToken {
				out = append(out, []byte(v.Str))
			} else {
				out = append(out, nil) // not a token: matches no secret
			}
		}
		if res.IsArray() {
			for _, v := range res.Array() {
				add(v)
			}
			// Every element carries the token: one without it would ride
			// along with a genuine one.
			if list, _, each := strings.Cut(s.field, ".#."); each {
				if n := gjson.GetBytes(r.Body, list+".#").Int(); n != int64(len(out)) {
					return nil, errors.New("an element of the body's " + list + " holds no token")
				}
			}
		} else if res.Exists() {
			add(res)
		}
		if len(out) == 0 {
			return nil, errors.New("the body holds no " + s.field)
		}
		return out, nil
	}
	vals, err := headers(r.Header, s.in)
	if err != nil {
		return nil, err
	}
	v := vals[0]
	if s.basic {
		enc, ok := strings.CutPrefix(v, "Basic ")
		raw, err := base64.StdEncoding.DecodeString(enc)
		if !ok || err != nil {
			return nil, malformed(s.in, "is not HTTP basic auth")
		}
		v = string(raw)
	}
	if len(v) > maxToken {
		return nil, malformed(s.in, "is longer than any token")
	}
	return [][]byte{[]byte(v)}, nil
}

// parse reads nothing a signature check needs: verifyTokens reads the
// tokens.
func (s tokenScheme) parse(r Request) (parsed, error) {
	if _, err := s.tokens(r); err != nil {
		if s.field != "" { // no token where the provider puts it: unauthenticated
			return parsed{}, fmt.Errorf("%w: %v", ErrBadSignature, err)
		}
		return parsed{}, err
	}
	return parsed{}, nil
}

// verifyTokens reports which of v's secrets every token of r matches.
func (v *Verifier) verifyTokens(s tokenScheme, r Request) (int, bool) {
	toks, err := s.tokens(r)
	if err != nil {
		return -1, false
	}
	for i, k := range v.keys {
		all := true
		for _, t := range toks {
			all = all && subtle.ConstantTimeCompare(t, k) == 1
		}
		if all {
			return i, true
		}
	}
	return -1, false
}

// tokenHeaders is what a sender of s adds: the first secret, where s
// carries it (a body field is the sender's to write).
func (v *Verifier) tokenHeaders(s tokenScheme) http.Header {
	h := make(http.Header)
	switch {
	case s.field != "":
	case s.basic:
		h.Set(s.in, "Basic "+base64.StdEncoding.EncodeToString(v.keys[0]))
	default:
		h.Set(s.in, string(v.keys[0]))
	}
	return h
}
