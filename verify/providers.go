package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// prefixed reads the one signature header name, which holds prefix and
// then the signature in hex or (b64) standard padded base64.
func prefixed(h http.Header, name, prefix string, b64 bool) ([]byte, error) {
	v, err := single(h, name)
	if err != nil {
		return nil, err
	}
	if v == "" {
		return nil, missing(name)
	}
	enc, ok := strings.CutPrefix(v, prefix)
	if !ok {
		return nil, malformed(name, "does not start with "+prefix)
	}
	if b64 {
		raw, err := base64.StdEncoding.Strict().DecodeString(enc)
		if err != nil {
			return nil, malformed(name, "is not base64")
		}
		return raw, nil
	}
	raw, err := hex.DecodeString(enc)
	if err != nil {
		return nil, malformed(name, "is not hex")
	}
	return raw, nil
}

// zoomScheme is Zoom's: x-zm-signature "v0=<hex>" over "v0:<ts>:<body>",
// ts from x-zm-request-timestamp (unix seconds). No delivery ID: dedupe
// keys it by the body's hash (Verifier.keyBy).
type zoomScheme struct{}

const (
	zoomSignature = "X-Zm-Signature"
	zoomTimestamp = "X-Zm-Request-Timestamp"
)

func (zoomScheme) name() string                      { return "zoom" }
func (zoomScheme) defaultFuture() time.Duration      { return DefaultTolerance }
func (zoomScheme) key(secret string) ([]byte, error) { return []byte(secret), nil }

func (zoomScheme) parse(r Request) (parsed, error) {
	var p parsed
	sig, err := prefixed(r.Header, zoomSignature, "v0=", false)
	if err != nil {
		return p, err
	}
	ts, err := single(r.Header, zoomTimestamp)
	if err != nil {
		return p, err
	}
	if ts == "" {
		return p, missing(zoomTimestamp)
	}
	if p.ts, err = parseUnix(zoomTimestamp, ts); err != nil {
		return p, err
	}
	p.hasTS = true
	p.sigs = [][]byte{sig}
	return p, nil
}

func (zoomScheme) mac(m hash.Hash, p parsed, body []byte) {
	writeAll(m, v0, itoa(p.ts), colon, body)
}

func (zoomScheme) header(h http.Header, p parsed, mac []byte) {
	h.Set(zoomTimestamp, strconv.FormatInt(p.ts, 10))
	h.Set(zoomSignature, "v0="+hex.EncodeToString(mac))
}

// metaScheme is Meta's (Facebook, Instagram, WhatsApp): X-Hub-Signature-256
// "sha256=<hex>" over the body, keyed by the app secret. No timestamp and
// no delivery ID: dedupe keys it by the body's hash (Verifier.keyBy).
type metaScheme struct{}

const metaSignature = "X-Hub-Signature-256"

func (metaScheme) name() string                      { return "meta" }
func (metaScheme) defaultFuture() time.Duration      { return DefaultTolerance }
func (metaScheme) key(secret string) ([]byte, error) { return []byte(secret), nil }

func (metaScheme) parse(r Request) (parsed, error) {
	sig, err := prefixed(r.Header, metaSignature, "sha256=", false)
	if err != nil {
		return parsed{}, err
	}
	return parsed{sigs: [][]byte{sig}}, nil
}

func (metaScheme) mac(m hash.Hash, _ parsed, body []byte) { m.Write(body) }

func (metaScheme) header(h http.Header, _ parsed, mac []byte) {
	h.Set(metaSignature, "sha256="+hex.EncodeToString(mac))
}

// twitterScheme is X's Account Activity API: x-twitter-webhooks-signature
// "sha256=<base64>" over the body, keyed by the app's consumer secret. No
// timestamp and no delivery ID: dedupe keys it by the body's hash
// (Verifier.keyBy).
type twitterScheme struct{}

const twitterSignature = "X-Twitter-Webhooks-Signature"

func (twitterScheme) name() string                      { return "twitter" }
func (twitterScheme) defaultFuture() time.Duration      { return DefaultTolerance }
func (twitterScheme) key(secret string) ([]byte, error) { return []byte(secret), nil }

func (twitterScheme) parse(r Request) (parsed, error) {
	sig, err := prefixed(r.Header, twitterSignature, "sha256=", true)
	if err != nil {
		return parsed{}, err
	}
	// X posts JSON objects only. Anything else might be a CRC answer's
	// token, signed by the same key and construction: "null", "123" or
	// "event=deleted" fit the token's alphabet, a body with "{" never does.
	if !jsonObject(r.Body) {
		return parsed{}, fmt.Errorf("%w: X signs JSON objects only, and an answer to its CRC handshake could sign this body", ErrBadSignature)
	}
	return parsed{sigs: [][]byte{sig}}, nil
}

// jsonObject reports whether body starts as a JSON object does.
func jsonObject(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

func (twitterScheme) mac(m hash.Hash, _ parsed, body []byte) { m.Write(body) }

func (twitterScheme) header(h http.Header, _ parsed, mac []byte) {
	h.Set(twitterSignature, "sha256="+base64.StdEncoding.EncodeToString(mac))
}
