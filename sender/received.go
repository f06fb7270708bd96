package sender

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/hookgate/hookgate/internal/wire"
)

// Received is what an envelope keeps of the request webhook_enqueue
// accepted from a provider (durable ingress), beyond its body and its
// Content-Type: each attempt sends it on.
type Received struct {
	// Source is the scheme that verified the request ("github"), sent as
	// Hookgate-Source; "" when no webhook_verify was in front.
	Source string
	// Path is the request's path and query, cleaned (ReceivedPath), that
	// keep_path appends to the destination's URL; "" for none.
	Path string
	// Header holds the kept headers, by canonical name, their values in
	// the request's order.
	Header http.Header
	// Redact names, canonical, the kept headers whose values are masked
	// wherever the envelope is shown (Shown); they are sent as they are.
	Redact []string
}

// Shown is r's header as the admin API, the CLI and the console show it:
// the values of the headers named in Redact masked. nil for none.
func (r *Received) Shown() http.Header {
	if r == nil || len(r.Header) == 0 {
		return nil
	}
	h := make(http.Header, len(r.Header))
	for name, vals := range r.Header {
		if slices.Contains(r.Redact, name) {
			vals = slices.Repeat([]string{Redacted}, len(vals))
		}
		h[name] = vals
	}
	return h
}

// ReceivedPath is the path and query of a request URL as keep_path keeps
// them: the path cleaned (no "." or ".." segment, no empty one), so that
// appended to a destination's URL it stays under the destination's own
// path, whatever the server behind makes of it: a backslash is a slash
// (as IIS reads it), and a segment that is "." or ".." before a ";" (as
// Tomcat reads "..;x") is that segment; the query as it came.
func ReceivedPath(u *url.URL) string {
	segs := strings.Split(strings.ReplaceAll(u.Path, "\\", "/"), "/")
	for i, s := range segs {
		if dots, _, ok := strings.Cut(s, ";"); ok && (dots == "." || dots == "..") {
			segs[i] = dots
		}
	}
	p := path.Clean("/" + strings.Join(segs, "/"))
	esc := (&url.URL{Path: p}).EscapedPath()
	if u.RawQuery != "" {
		// A raw query holds no "#" from a request; from a damaged store
		// it would begin a fragment.
		esc += "?" + strings.ReplaceAll(u.RawQuery, "#", "%23")
	}
	return esc
}

// joinURL is base with the received path and query appended: the path
// under base's own path, the query after base's own, less the parameters
// base's query sets (the destination's win, whichever a framework reads,
// the first or the last). It never changes the scheme, the host or the
// user info: only a path and a query are taken from received, cleaned
// again whatever the store held.
func joinURL(base *url.URL, received string) *url.URL {
	ref, err := url.ParseRequestURI(received)
	if err != nil {
		return base
	}
	u := *base
	rel := ReceivedPath(ref)
	relPath, query, _ := strings.Cut(rel, "?")
	joined := strings.TrimSuffix(base.EscapedPath(), "/") + relPath
	if p, err := url.PathUnescape(joined); err == nil {
		u.Path, u.RawPath = p, joined
	}
	query = withoutParams(query, base.Query())
	switch {
	case query == "":
	case u.RawQuery == "":
		u.RawQuery = query
	default:
		u.RawQuery += "&" + query
	}
	return &u
}

// withoutParams is the raw query q less the parameters set names, each
// kept pair as it came.
func withoutParams(q string, set url.Values) string {
	if len(set) == 0 {
		return q
	}
	var kept []string
	for pair := range strings.SplitSeq(q, "&") {
		name, _, _ := strings.Cut(pair, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if _, ok := set[name]; !ok && pair != "" {
			kept = append(kept, pair)
		}
	}
	return strings.Join(kept, "&")
}

// The Received block's stored form, before the body in a stored payload
// (Meta.ReceivedSize is its length):
//
//	string source | string path | uvarint n | n × string redacted name |
//	uvarint m | m × (string name | uvarint k | k × string value)
//
// the headers in name order, so that the same request stores the same
// bytes.

// size is the length of r's stored form; 0 for nil.
func (r *Received) size() int {
	if r == nil {
		return 0
	}
	n := strSize(r.Source) + strSize(r.Path) + uvarintSize(len(r.Redact)) + uvarintSize(len(r.Header))
	for _, name := range r.Redact {
		n += strSize(name)
	}
	for name, vals := range r.Header {
		n += strSize(name) + uvarintSize(len(vals))
		for _, v := range vals {
			n += strSize(v)
		}
	}
	return n
}

func strSize(s string) int  { return uvarintSize(len(s)) + len(s) }
func uvarintSize(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }

// appendReceived appends r's stored form to b.
func appendReceived(b []byte, r *Received) []byte {
	if r == nil {
		return b
	}
	b = wire.AppendString(b, r.Source)
	b = wire.AppendString(b, r.Path)
	b = binary.AppendUvarint(b, uint64(len(r.Redact)))
	for _, name := range r.Redact {
		b = wire.AppendString(b, name)
	}
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = wire.AppendString(b, name)
		vals := r.Header[name]
		b = binary.AppendUvarint(b, uint64(len(vals)))
		for _, v := range vals {
			b = wire.AppendString(b, v)
		}
	}
	return b
}

var errBadReceived = errors.New("malformed stored request headers")

// readReceived decodes what appendReceived wrote; b must be all of it.
// Every count is checked against the bytes left (each entry takes one at
// least), so that a damaged block cannot make it allocate or loop beyond
// its own length.
func readReceived(b []byte) (*Received, error) {
	d := wire.Decoder{Buf: b}
	count := func() (int, bool) {
		n := d.Uvarint()
		return int(n), !d.Err && n <= uint64(len(d.Buf))
	}
	r := &Received{Source: d.LenString(), Path: d.LenString()}
	n, ok := count()
	if !ok {
		return nil, errBadReceived
	}
	for range n {
		r.Redact = append(r.Redact, d.LenString())
	}
	m, ok := count()
	if !ok {
		return nil, errBadReceived
	}
	r.Header = make(http.Header, m)
	for range m {
		name := d.LenString()
		k, ok := count()
		if !ok {
			return nil, errBadReceived
		}
		vals := make([]string, 0, k)
		for range k {
			vals = append(vals, d.LenString())
		}
		r.Header[name] = vals
	}
	// Only the canonical form is read: a block that would not be written
	// again byte for byte (names out of order or repeated, a long varint)
	// is damaged, and a record's ReceivedSize must stay its length.
	if d.Err || len(d.Buf) != 0 || !bytes.Equal(appendReceived(make([]byte, 0, len(b)), r), b) {
		return nil, errBadReceived
	}
	return r, nil
}

// StoredPayload is what a queue stores as e's payload: e's Received
// block, then its body. Its record (MetaOf) says where the body starts.
func StoredPayload(e *Envelope) []byte {
	if e.Received == nil {
		return e.Payload
	}
	b := make([]byte, 0, e.Received.size()+len(e.Payload))
	b = appendReceived(b, e.Received)
	return append(b, e.Payload...)
}
