package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // G505: Twilio signs with HMAC-SHA1, which does not rest on SHA-1's collision resistance
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Twilio's headers: the signature, and the delivery ID it does not sign.
const (
	twilioSignatureHeader = "X-Twilio-Signature"
	twilioIDHeader        = "I-Twilio-Idempotency-Token"
)

// twilioScheme is Twilio's: X-Twilio-Signature "<base64>", HMAC-SHA1 keyed
// by the account's auth token over the URL the provider called, then, for
// a form body, each parameter's name and value in name order; a JSON body
// is signed through the URL's bodySHA256, its hex SHA-256. No timestamp;
// the ID is I-Twilio-Idempotency-Token, which is not signed.
//
// As Twilio's reference validators do, the URL verifies as given and with
// its port toggled: without it when it has one, else with the scheme's
// default (443 for https, 80 otherwise).
type twilioScheme struct{}

func (twilioScheme) name() string                      { return "twilio" }
func (twilioScheme) defaultFuture() time.Duration      { return DefaultTolerance }
func (twilioScheme) key(secret string) ([]byte, error) { return []byte(secret), nil }

func (twilioScheme) parse(r Request) (parsed, error) {
	var p parsed
	vals, err := headers(r.Header, twilioSignatureHeader)
	if err != nil {
		return p, err
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(vals[0])
	if err != nil {
		return p, malformed(twilioSignatureHeader, "is not base64")
	}
	p.sigs = [][]byte{raw}
	if p.id, err = single(r.Header, twilioIDHeader); err != nil {
		return p, err
	}
	return p, twilioContents(r, &p, false)
}

// prepare builds the content a sender signs: the URL as given first.
func (twilioScheme) prepare(r Request, p *parsed) error {
	return twilioContents(r, p, true)
}

func (twilioScheme) mac(m hash.Hash, p parsed, _ []byte) {
	m.Write(p.contents[p.alt])
	if p.form != nil {
		p.form.writeTo(m)
	}
}

// newHash makes twilio's HMAC one of SHA-1.
func (twilioScheme) newHash() hash.Hash { return sha1.New() } //nolint:gosec // G401: as above, HMAC-SHA1 is Twilio's

func (twilioScheme) header(h http.Header, p parsed, mac []byte) {
	h.Set(twilioSignatureHeader, base64.StdEncoding.EncodeToString(mac))
	if p.id != "" {
		h.Set(twilioIDHeader, p.id)
	}
}

// twilioContents fills p.contents with the URL Twilio signs, as given and
// with its port toggled, and p.form with the form parameters that follow
// it. A URL with bodySHA256 in its query signs the body through it: the
// body must hash to it, and the content is the URL alone. Otherwise a form
// body's parameters follow the URL; any other non-empty body would go
// unsigned, and is refused. signing says a sender builds the content, so a
// body that does not match its bodySHA256 is a mistake to report rather
// than a forgery. The caller frees p.form (parsed.free).
func twilioContents(r Request, p *parsed, signing bool) error {
	forms, err := twilioURLs(r.URL)
	if err != nil {
		if !signing { // the gateway's own URL, or its url setting, is at fault
			return fmt.Errorf("%w: %v", ErrBadSignature, err)
		}
		return err
	}
	query, _, _ := strings.Cut(r.URL, "#")
	_, query, _ = strings.Cut(query, "?")
	q, _ := url.ParseQuery(query) // what parses: the URL itself is signed
	if want, ok := q["bodySHA256"]; ok {
		sum := sha256.Sum256(r.Body)
		got := hex.EncodeToString(sum[:])
		if !hmac.Equal([]byte(got), []byte(want[0])) {
			if signing {
				return fmt.Errorf("the URL's bodySHA256 is not the body's SHA-256 (%s)", got)
			}
			return fmt.Errorf("%w: the body does not match the URL's bodySHA256", ErrBadSignature)
		}
	} else if len(r.Body) > 0 {
		if p.form, err = twilioParams(r); err != nil {
			if signing {
				sum := sha256.Sum256(r.Body)
				return fmt.Errorf("%w; for another body, add bodySHA256=%s to the URL's query", err, hex.EncodeToString(sum[:]))
			}
			return err
		}
	}
	p.contents = make([][]byte, len(forms))
	for i, u := range forms {
		p.contents[i] = []byte(u)
	}
	return nil
}

// maxTwilioParams is the most parameters a form body may hold. Twilio's
// callbacks hold tens (a message with ten media, about fifty); a body of
// thousands could only be a forgery, and is refused before it costs work.
const maxTwilioParams = 1000

// twilioForm is a form body's parameters as Twilio signs them, decoded
// once: for each name in order, the name and each of its values, the
// values sorted and each once, as twilio-python and twilio-node do. Each
// pair is its name then its value, adjacent in decoded; the pairs are
// sorted and unique. A form is taken from a pool and put back by free:
// an unsigned request costs a scan of the body, a sort of at most
// maxTwilioParams pairs, and the MACs, not a map and a string per
// parameter.
type twilioForm struct {
	decoded []byte
	pairs   []formPair
}

// formPair is one parameter: its name is decoded[start:mid], its value
// decoded[mid:end].
type formPair struct{ start, mid, end int }

var twilioForms = sync.Pool{New: func() any { return new(twilioForm) }}

// maxPooledForm is the largest decoded buffer kept for reuse: a
// max_body raised far past the default does not pin its size per core.
const maxPooledForm = 4 << 20

func (f *twilioForm) free() {
	if cap(f.decoded) <= maxPooledForm {
		twilioForms.Put(f)
	}
}

// writeTo writes the signed parameters into the MAC m.
func (f *twilioForm) writeTo(m hash.Hash) {
	for _, pr := range f.pairs {
		m.Write(f.decoded[pr.start:pr.end])
	}
}

// twilioParams reads a form body's parameters as Twilio signs them
// (twilioForm); the body parses as url.ParseQuery parses it, or is
// refused.
func twilioParams(r Request) (*twilioForm, error) {
	const ctH, form = "Content-Type", "application/x-www-form-urlencoded"
	ct, err := single(r.Header, ctH)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(ct); mt != form {
		return nil, malformed(ctH, "is not "+form+" and the URL has no bodySHA256: the body would not be signed")
	}
	if n := bytes.Count(r.Body, []byte{'&'}) + 1; n > maxTwilioParams {
		return nil, malformed(ctH, fmt.Sprintf("is %s, and the body holds %d parameters, over %d: Twilio sends far fewer", form, n, maxTwilioParams))
	}
	f := twilioForms.Get().(*twilioForm)
	f.decoded, f.pairs = slices.Grow(f.decoded[:0], len(r.Body)), f.pairs[:0]
	for rest := r.Body; len(rest) > 0; {
		var seg []byte
		seg, rest, _ = bytes.Cut(rest, []byte{'&'})
		if len(seg) == 0 {
			continue
		}
		if bytes.IndexByte(seg, ';') >= 0 {
			f.free()
			return nil, malformed(ctH, "is "+form+" but the body holds a ';', which does not parse as a form")
		}
		name, value, _ := bytes.Cut(seg, []byte{'='})
		pr := formPair{start: len(f.decoded)}
		var ok bool
		if f.decoded, ok = unescapeQuery(f.decoded, name); ok {
			pr.mid = len(f.decoded)
			f.decoded, ok = unescapeQuery(f.decoded, value)
		}
		if !ok {
			f.free()
			return nil, malformed(ctH, "is "+form+" but the body does not parse as a form")
		}
		pr.end = len(f.decoded)
		f.pairs = append(f.pairs, pr)
	}
	d := f.decoded
	slices.SortFunc(f.pairs, func(a, b formPair) int {
		if c := bytes.Compare(d[a.start:a.mid], d[b.start:b.mid]); c != 0 {
			return c
		}
		return bytes.Compare(d[a.mid:a.end], d[b.mid:b.end])
	})
	f.pairs = slices.CompactFunc(f.pairs, func(a, b formPair) bool {
		return bytes.Equal(d[a.start:a.mid], d[b.start:b.mid]) && bytes.Equal(d[a.mid:a.end], d[b.mid:b.end])
	})
	return f, nil
}

// unescapeQuery appends s, a query component, decoded to dst: "+" is a
// space, "%XY" the byte XY; a "%" without two hex digits after it does not
// decode (url.QueryUnescape's rule). A component without either is copied
// whole; one with them is decoded byte by byte, in place of a copy.
func unescapeQuery(dst, s []byte) ([]byte, bool) {
	if bytes.IndexByte(s, '%') < 0 && bytes.IndexByte(s, '+') < 0 {
		return append(dst, s...), true
	}
	n := len(dst)
	dst = slices.Grow(dst, len(s))[:n+len(s)] // decoding never grows
	out := dst[n:]
	j := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '+':
			c = ' '
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return dst[:n], false
			}
			c = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
		}
		out[j] = c
		j++
	}
	return dst[:n+j], true
}

// twilioURLs returns u as given and with its port toggled: without it
// when u has one, else with the scheme's default port. The rest of u is
// kept byte for byte.
func twilioURLs(u string) ([]string, error) {
	if u == "" {
		return nil, errors.New("scheme twilio signs the URL the provider called, and the request has none")
	}
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || !validScheme(scheme) {
		return nil, errors.New("scheme twilio signs an absolute URL, scheme://host/path?query, and the request's is not one")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	host := strings.LastIndexByte(authority, '@') + 1 // after any user info
	colon := strings.LastIndexByte(authority, ':')
	if colon >= host && colon > strings.LastIndexByte(authority, ']') { // not inside an IPv6 literal
		return []string{u, scheme + "://" + authority[:colon] + tail}, nil
	}
	port := ":80"
	if strings.EqualFold(scheme, "https") {
		port = ":443"
	}
	return []string{u, scheme + "://" + authority + port + tail}, nil
}

// validScheme reports whether s is a URL scheme (RFC 3986): a letter, then
// letters, digits, "+", "-" or ".".
func validScheme(s string) bool {
	for i, c := range []byte(s) {
		letter := c|0x20 >= 'a' && c|0x20 <= 'z'
		other := c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
		if !letter && (i == 0 || !other) {
			return false
		}
	}
	return s != ""
}
