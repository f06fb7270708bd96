package verify

import (
	"cmp"
	"crypto/sha1" //nolint:gosec // G505: HMAC-SHA1 is what some providers sign with (GitHub's X-Hub-Signature); HMAC does not rest on SHA-1's collision resistance
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HMAC describes a provider's HMAC signature that no named scheme covers:
// where the delivery ID, the timestamp and the signature are, how the
// signature is computed and encoded, and what is signed.
type HMAC struct {
	// IDHeader names the delivery ID's header; optional.
	IDHeader string `json:"id_header,omitempty"`
	// TimestampHeader names the timestamp's header (unix seconds, or RFC
	// 3339); optional. When set, it is required, checked against the
	// tolerance, and must be signed as it is written: content holds
	// {timestamp}.
	TimestampHeader string `json:"timestamp_header,omitempty"`
	// TimestampFormat is how the timestamp is written: unix (seconds, the
	// default) or rfc3339 (in the signing time's zone, as Box does), which
	// Verify reads alike, so that only Sign needs it; or unix_ms
	// (milliseconds, as WorkOS and Webflow write it), which Verify reads
	// only so.
	TimestampFormat string `json:"timestamp_format,omitempty"`
	// SignatureHeader names the signature's header. Required.
	SignatureHeader string `json:"signature_header"`
	// Algorithm is sha1, sha256 or sha512. Default sha256.
	Algorithm string `json:"algorithm,omitempty"`
	// Encoding is hex, base64 (standard, padded), or base64url (URL-safe,
	// unpadded, as Sanity writes it). Default hex.
	Encoding string `json:"encoding,omitempty"`
	// Prefix is stripped from the signature header's value (e.g.
	// "sha256="); a value without it is malformed.
	Prefix string `json:"prefix,omitempty"`
	// Content is the signed content: a template over {id}, {timestamp},
	// {body}, and {method} and {url}, the request's as the sender made
	// it (webhook_verify's url option, as for twilio). Default "{body}".
	Content string `json:"content,omitempty"`
	// Separator, when set, splits the signature header into fields: each
	// that starts with Prefix is a signature (any may match: PagerDuty's
	// "v1=<hex>,v1=<hex>" during a rotation), the others are ignored but
	// the timestamp's.
	Separator string `json:"separator,omitempty"`
	// TimestampField names the field of the signature header that holds
	// the timestamp, instead of a header of its own (Paddle's
	// "ts=<unix>;h1=<hex>": timestamp_field ts, separator ";", prefix
	// "h1="). It needs Separator.
	TimestampField string `json:"timestamp_field,omitempty"`
}

// hmacScheme is the generic scheme configured by an HMAC: by the user
// (hmac), or by a provider's row of the catalogue (named).
type hmacScheme struct {
	named string // the provider's name; "" for hmac
	cfg   HMAC
	hash  func() hash.Hash
	parts []string // the template split: literal text, and "{id}", "{timestamp}", "{body}"
	// credentials are the signature's and the timestamp's headers
	// (Verifier.CredentialHeaders).
	credentials []string
	// signsTarget is whether the content signs the request's {method} or
	// {url}: the request's URL is then needed (Verifier.SignsURL).
	signsTarget bool
}

// newHMACScheme checks cfg and builds its scheme.
func newHMACScheme(cfg HMAC) (*hmacScheme, error) {
	s := &hmacScheme{cfg: cfg, credentials: hmacCredentials(cfg)}
	if cfg.SignatureHeader == "" {
		return nil, errors.New("scheme hmac: signature_header is required")
	}
	switch cfg.Algorithm {
	case "", "sha256":
		s.hash = sha256.New
	case "sha1":
		s.hash = sha1.New
	case "sha512":
		s.hash = sha512.New
	default:
		return nil, fmt.Errorf("scheme hmac: algorithm %q: want sha1, sha256 or sha512", cfg.Algorithm)
	}
	switch cfg.Encoding {
	case "", "hex", "base64", "base64url":
	default:
		return nil, fmt.Errorf("scheme hmac: encoding %q: want hex, base64 or base64url", cfg.Encoding)
	}
	switch {
	case cfg.TimestampField != "" && cfg.Separator == "":
		return nil, errors.New("scheme hmac: timestamp_field needs the separator between the signature header's fields")
	case cfg.TimestampField != "" && cfg.TimestampHeader != "":
		return nil, errors.New("scheme hmac: a timestamp_header or a timestamp_field, not both")
	case cfg.Separator != "" && cfg.Prefix == "":
		return nil, errors.New("scheme hmac: separator needs the prefix that marks a signature among the fields")
	}
	switch cfg.TimestampFormat {
	case "", "unix":
	case "rfc3339", "unix_ms":
		if cfg.TimestampHeader == "" && cfg.TimestampField == "" {
			return nil, fmt.Errorf("scheme hmac: timestamp_format %s: timestamp_header is required", cfg.TimestampFormat)
		}
	default:
		return nil, fmt.Errorf("scheme hmac: timestamp_format %q: want unix, unix_ms or rfc3339", cfg.TimestampFormat)
	}
	content := cfg.Content
	if content == "" {
		content = "{body}"
	}
	for content != "" {
		i := strings.IndexByte(content, '{')
		if i < 0 {
			s.parts = append(s.parts, content)
			break
		}
		if i > 0 {
			s.parts = append(s.parts, content[:i])
		}
		end := strings.IndexByte(content[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("scheme hmac: content %q: an unclosed {", cfg.Content)
		}
		switch field := content[i : i+end+1]; field {
		case "{body}":
		case "{method}", "{url}":
			s.signsTarget = true
		case "{id}":
			if cfg.IDHeader == "" {
				return nil, errors.New("scheme hmac: content signs {id}: id_header is required")
			}
		case "{timestamp}":
			if cfg.TimestampHeader == "" && cfg.TimestampField == "" {
				return nil, errors.New("scheme hmac: content signs {timestamp}: timestamp_header is required (or timestamp_field)")
			}
		default:
			return nil, fmt.Errorf("scheme hmac: content %q: unknown field %s (want {id}, {timestamp}, {body}, {method} or {url})", cfg.Content, field)
		}
		s.parts = append(s.parts, content[i:i+end+1])
		content = content[i+end+1:]
	}
	if (cfg.TimestampHeader != "" || cfg.TimestampField != "") && !slices.Contains(s.parts, "{timestamp}") {
		// The window would judge a timestamp anyone may rewrite.
		return nil, errors.New("scheme hmac: a timestamp is checked against the tolerance only when content signs it: add {timestamp} to content, or drop timestamp_header and timestamp_field")
	}
	return s, nil
}

func (s *hmacScheme) name() string {
	if s.named != "" {
		return s.named
	}
	return "hmac"
}

func (s *hmacScheme) defaultFuture() time.Duration      { return DefaultTolerance }
func (s *hmacScheme) key(secret string) ([]byte, error) { return []byte(secret), nil }

// prepare reads the request's method and URL, for a content that signs
// them (targetScheme).
func (s *hmacScheme) prepare(r Request, p *parsed) error {
	if !s.signsTarget {
		return nil
	}
	if r.URL == "" {
		return errors.New("the request's URL is unknown, and " + s.name() + " signs it")
	}
	p.method, p.url = cmp.Or(r.Method, http.MethodPost), r.URL
	return nil
}

func (s *hmacScheme) parse(r Request) (parsed, error) {
	h := r.Header
	var p parsed
	if err := s.prepare(r, &p); err != nil {
		return p, err
	}
	sigH := s.cfg.SignatureHeader
	names := []string{sigH}
	if s.cfg.TimestampHeader != "" {
		names = append(names, s.cfg.TimestampHeader)
	}
	vals, err := headers(h, names...)
	if err != nil {
		return p, err
	}
	if s.cfg.IDHeader != "" {
		if p.id, err = single(h, s.cfg.IDHeader); err != nil {
			return p, err
		}
	}
	if s.cfg.TimestampHeader != "" {
		p.rawTS = vals[1]
		if p.ts, err = s.readTS(s.cfg.TimestampHeader, p.rawTS); err != nil {
			return p, err
		}
		p.hasTS = true
	}
	if s.cfg.Separator == "" {
		raw, err := s.decode(vals[0])
		if err != nil {
			return p, err
		}
		p.sigs = [][]byte{raw}
		return p, nil
	}
	for field := range strings.SplitSeq(vals[0], s.cfg.Separator) {
		field = strings.TrimSpace(field)
		if ts, ok := strings.CutPrefix(field, s.cfg.TimestampField+"="); ok && s.cfg.TimestampField != "" {
			if p.hasTS {
				return p, malformed(sigH, "holds its "+s.cfg.TimestampField+" field twice")
			}
			p.rawTS = ts
			if p.ts, err = s.readTS(sigH, ts); err != nil {
				return p, err
			}
			p.hasTS = true
			continue
		}
		if !strings.HasPrefix(field, s.cfg.Prefix) {
			continue // another version's signature, or a field unknown here
		}
		if len(p.sigs) == maxEntries {
			return p, malformed(sigH, fmt.Sprintf("holds over %d signatures", maxEntries))
		}
		raw, err := s.decode(field)
		if err != nil {
			return p, err
		}
		p.sigs = append(p.sigs, raw)
	}
	switch {
	case s.cfg.TimestampField != "" && !p.hasTS:
		return p, malformed(sigH, "has no "+s.cfg.TimestampField+" field")
	case len(p.sigs) == 0:
		return p, malformed(sigH, "has no "+s.cfg.Prefix+" signature")
	}
	return p, nil
}

// decode reads one signature, Prefix and then the encoded MAC.
func (s *hmacScheme) decode(v string) ([]byte, error) {
	enc, ok := strings.CutPrefix(v, s.cfg.Prefix)
	if !ok {
		return nil, malformed(s.cfg.SignatureHeader, "does not start with "+s.cfg.Prefix)
	}
	var raw []byte
	var err error
	switch s.cfg.Encoding {
	case "base64":
		raw, err = base64.StdEncoding.Strict().DecodeString(enc)
	case "base64url":
		raw, err = base64.RawURLEncoding.Strict().DecodeString(enc)
	default:
		raw, err = hex.DecodeString(enc)
	}
	if err != nil {
		return nil, malformed(s.cfg.SignatureHeader, "is not "+s.encoding())
	}
	return raw, nil
}

func (s *hmacScheme) encoding() string {
	if s.cfg.Encoding == "" {
		return "hex"
	}
	return s.cfg.Encoding
}

// readTS reads the timestamp as written in header, in unix seconds.
func (s *hmacScheme) readTS(header, v string) (int64, error) {
	if s.cfg.TimestampFormat == "unix_ms" {
		ms, err := parseUnix(header, v)
		return ms / 1000, err
	}
	return parseTimestamp(header, v)
}

// parseTimestamp reads a timestamp header: canonical unix seconds, or RFC
// 3339 (as Twitch sends).
func parseTimestamp(header, v string) (int64, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.Unix(), nil
	}
	return parseUnix(header, v)
}

// newHash makes the HMAC one of the configured algorithm.
func (s *hmacScheme) newHash() hash.Hash { return s.hash() }

func (s *hmacScheme) mac(m hash.Hash, p parsed, body []byte) {
	ts := p.rawTS
	if ts == "" {
		ts = strconv.FormatInt(p.ts, 10)
	}
	for _, part := range s.parts {
		switch part {
		case "{body}":
			m.Write(body)
		case "{id}":
			m.Write([]byte(p.id))
		case "{timestamp}":
			m.Write([]byte(ts))
		case "{method}":
			m.Write([]byte(p.method))
		case "{url}":
			m.Write([]byte(p.url))
		default:
			m.Write([]byte(part))
		}
	}
}

// signsID reports whether the content signs the delivery ID. When it does
// not, a captured request verifies under any ID its sender writes, so
// dedupe keys it by its body (Verifier.keyBy).
func (s *hmacScheme) signsID() bool { return slices.Contains(s.parts, "{id}") }

// stamp is the timestamp as Sign writes it and signs it.
func (s *hmacScheme) stamp(t time.Time) string {
	switch s.cfg.TimestampFormat {
	case "rfc3339":
		return t.Format(time.RFC3339Nano)
	case "unix_ms":
		return strconv.FormatInt(t.UnixMilli(), 10)
	}
	return strconv.FormatInt(t.Unix(), 10)
}

func (s *hmacScheme) header(h http.Header, p parsed, mac []byte) {
	if s.cfg.IDHeader != "" && p.id != "" {
		h.Set(s.cfg.IDHeader, p.id)
	}
	if s.cfg.TimestampHeader != "" {
		ts := p.rawTS
		if ts == "" {
			ts = strconv.FormatInt(p.ts, 10)
		}
		h.Set(s.cfg.TimestampHeader, ts)
	}
	enc := hex.EncodeToString(mac)
	switch s.cfg.Encoding {
	case "base64":
		enc = base64.StdEncoding.EncodeToString(mac)
	case "base64url":
		enc = base64.RawURLEncoding.EncodeToString(mac)
	}
	v := s.cfg.Prefix + enc
	if s.cfg.TimestampField != "" {
		ts := p.rawTS
		if ts == "" {
			ts = strconv.FormatInt(p.ts, 10)
		}
		v = s.cfg.TimestampField + "=" + ts + s.cfg.Separator + v
	}
	h.Set(s.cfg.SignatureHeader, v)
}
