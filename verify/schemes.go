package verify

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

func hmacSHA256(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// itoa renders a unix timestamp as the decimal bytes that are signed.
func itoa(ts int64) []byte { return strconv.AppendInt(nil, ts, 10) }

// The separators the schemes sign.
var (
	dot   = []byte{'.'}
	colon = []byte{':'}
	v0    = []byte("v0:")
)

// writeAll writes each part into the MAC m.
func writeAll(m hash.Hash, parts ...[]byte) {
	for _, p := range parts {
		m.Write(p)
	}
}

// idTimestampSignature reads the three headers of the schemes that carry
// an ID, a unix timestamp and a signature in headers of their own, in that
// order of checking; it returns the signature header's raw value.
func idTimestampSignature(h http.Header, idH, tsH, sigH string) (parsed, string, error) {
	var p parsed
	var vals [3]string // headers' answer, without its allocation
	for i, name := range [3]string{idH, tsH, sigH} {
		v, err := single(h, name)
		if err != nil {
			return p, "", err
		}
		if v == "" {
			return p, "", missing(name)
		}
		vals[i] = v
	}
	p.id = vals[0]
	tsv, sigv := vals[1], vals[2]
	ts, err := parseUnix(tsH, tsv)
	if err != nil {
		return p, "", err
	}
	p.ts, p.hasTS = ts, true
	return p, sigv, nil
}

// headers reads each named header, once: a missing one is ErrMissingHeader
// (checked in order), a repeated one ErrMalformedHeader.
func headers(h http.Header, names ...string) ([]string, error) {
	vals := make([]string, len(names))
	for i, name := range names {
		v, err := single(h, name)
		if err != nil {
			return nil, err
		}
		if v == "" {
			return nil, missing(name)
		}
		vals[i] = v
	}
	return vals, nil
}

// standardScheme is Standard Webhooks (and Svix, which it grew from):
// webhook-id, webhook-timestamp, webhook-signature "v1,<base64> ...",
// signed content "id.timestamp.body", secret "whsec_<base64>".
type standardScheme struct {
	// ed25519 is whether the Verifier holds an Ed25519 key: without one,
	// v1a entries are skipped.
	ed25519 bool
}

func (standardScheme) name() string                 { return "standard" }
func (standardScheme) defaultFuture() time.Duration { return DefaultTolerance }

func (standardScheme) key(secret string) ([]byte, error) {
	s := strings.TrimPrefix(secret, "whsec_")
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		k, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, errors.New("standard scheme secrets are base64, optionally prefixed whsec_")
	}
	if len(k) < minKeyBytes {
		// An empty whsec_ (a shell variable that expanded to nothing)
		// would let anyone sign.
		return nil, fmt.Errorf("a whsec_ secret must decode to at least %d bytes, this one is %d (Standard Webhooks recommends 24 to 64)", minKeyBytes, len(k))
	}
	return k, nil
}

// minKeyBytes is the shortest whsec_ key accepted.
const minKeyBytes = 16

// standardHeaders are the header names tried in order: Standard Webhooks', then Svix's.
var standardHeaders = [...][3]string{
	{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"},
	{"Svix-Id", "Svix-Timestamp", "Svix-Signature"},
}

func (s standardScheme) parse(r Request) (parsed, error) {
	h := r.Header
	names := standardHeaders[0]
	if h.Get(names[2]) == "" && h.Get(standardHeaders[1][2]) != "" {
		names = standardHeaders[1]
	}
	sigH := names[2]
	p, sigv, err := idTimestampSignature(h, names[0], names[1], sigH)
	if err != nil {
		return p, err
	}
	// Entries are read as the reference libraries read them: an entry that
	// is not a version,signature pair, of an unknown version, that does
	// not decode, or a v1a entry with no Ed25519 key to check it, is
	// skipped, so that a sender built on those libraries is never refused
	// for an entry they ignore. Past maxEntries of a version, entries are
	// skipped too: each v1a entry costs a hash of the whole body, and a
	// header of thousands would cost seconds.
	for rest := sigv; rest != ""; {
		var entry string
		entry, rest, _ = strings.Cut(rest, " ") // as the libraries split: on spaces
		version, sig, ok := strings.Cut(entry, ",")
		usable := version == "v1" || version == "v1a" && s.ed25519
		if !ok || !usable || version == "v1" && len(p.sigs) == maxEntries || version == "v1a" && len(p.asym) == maxEntries {
			continue
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(sig)
		if err != nil {
			continue
		}
		if version == "v1a" {
			p.asym = append(p.asym, raw)
		} else {
			p.sigs = append(p.sigs, raw)
		}
	}
	if len(p.sigs) == 0 && len(p.asym) == 0 {
		if s.ed25519 {
			return p, malformed(sigH, "has no usable v1 or v1a signature")
		}
		return p, malformed(sigH, "has no usable v1 signature (v1a needs a whpk_ or whsk_ key)")
	}
	return p, nil
}

// maxEntries is the most signatures of one version a header is read for:
// a sender signs with a few secrets at once while it rotates, not more.
const maxEntries = 8

// signedContent is what Standard Webhooks signs: "id.timestamp.body".
func signedContent(p parsed, body []byte) []byte {
	b := make([]byte, 0, len(p.id)+24+len(body))
	b = append(b, p.id...)
	b = append(b, '.')
	b = append(b, itoa(p.ts)...)
	b = append(b, '.')
	return append(b, body...)
}

// Standard Webhooks' asymmetric keys: whpk_<base64 Ed25519 public key>
// verifies v1a signatures; whsk_<base64 32-byte seed> signs them (and
// verifies, with its public key).
const (
	publicKeyPrefix  = "whpk_"
	privateKeyPrefix = "whsk_"
)

// asymmetricKey reads a whpk_ or whsk_ secret of the standard scheme; ok
// is false for any other secret.
func asymmetricKey(s scheme, secret string) (pub ed25519.PublicKey, priv ed25519.PrivateKey, ok bool, err error) {
	if s.name() != "standard" {
		return nil, nil, false, nil
	}
	if b64, isPub := strings.CutPrefix(secret, publicKeyPrefix); isPub {
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, nil, true, errors.New("a whpk_ key is the base64 of a 32-byte Ed25519 public key")
		}
		return ed25519.PublicKey(raw), nil, true, nil
	}
	if b64, isPriv := strings.CutPrefix(secret, privateKeyPrefix); isPriv {
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != ed25519.SeedSize {
			return nil, nil, true, errors.New("a whsk_ key is the base64 of a 32-byte Ed25519 seed")
		}
		priv := ed25519.NewKeyFromSeed(raw)
		return priv.Public().(ed25519.PublicKey), priv, true, nil
	}
	return nil, nil, false, nil
}

func (standardScheme) mac(m hash.Hash, p parsed, body []byte) {
	writeAll(m, []byte(p.id), dot, itoa(p.ts), dot, body)
}

func (standardScheme) header(h http.Header, p parsed, mac []byte) {
	h.Set("Webhook-Id", p.id)
	h.Set("Webhook-Timestamp", strconv.FormatInt(p.ts, 10))
	h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(mac))
}

// stripeScheme is Stripe's: Stripe-Signature "t=<ts>,v1=<hex>[,v1=...]",
// signed content "ts.body", keyed by the whole whsec_ string.
type stripeScheme struct{}

func (stripeScheme) name() string                 { return "stripe" }
func (stripeScheme) defaultFuture() time.Duration { return -1 }
func (stripeScheme) key(secret string) ([]byte, error) {
	return []byte(secret), nil
}

func (stripeScheme) parse(r Request) (parsed, error) {
	h, body := r.Header, r.Body
	const sigH = "Stripe-Signature"
	var p parsed
	vals, err := headers(h, sigH)
	if err != nil {
		return p, err
	}
	v := vals[0]
	// Items are read as Stripe's libraries read them: an empty item, one
	// that is not key=value, of another key (v0), or a v1 that is not hex,
	// is skipped. A bad or second t= is not: it is what the MAC covers.
	for _, item := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if p.hasTS {
				return p, malformed(sigH, "has more than one t=")
			}
			ts, err := parseUnix(sigH, val)
			if err != nil {
				return p, malformed(sigH, "t is not a unix timestamp")
			}
			p.ts, p.hasTS = ts, true
		case "v1":
			if raw, err := hex.DecodeString(val); err == nil {
				p.sigs = append(p.sigs, raw)
			}
		}
	}
	if !p.hasTS {
		return p, malformed(sigH, "has no t=")
	}
	if len(p.sigs) == 0 {
		return p, malformed(sigH, "has no usable v1=")
	}
	p.id = gjson.GetBytes(body, "id").String()
	return p, nil
}

func (stripeScheme) mac(m hash.Hash, p parsed, body []byte) {
	writeAll(m, itoa(p.ts), dot, body)
}

func (stripeScheme) header(h http.Header, p parsed, mac []byte) {
	h.Set("Stripe-Signature", "t="+strconv.FormatInt(p.ts, 10)+",v1="+hex.EncodeToString(mac))
}

// githubScheme is GitHub's: X-Hub-Signature-256 "sha256=<hex>" over the
// body; no timestamp; ID from X-GitHub-Delivery.
type githubScheme struct{}

func (githubScheme) name() string                      { return "github" }
func (githubScheme) defaultFuture() time.Duration      { return DefaultTolerance }
func (githubScheme) key(secret string) ([]byte, error) { return []byte(secret), nil }

func (githubScheme) parse(r Request) (parsed, error) {
	h := r.Header
	const sigH, idH = "X-Hub-Signature-256", "X-GitHub-Delivery"
	var p parsed
	vals, err := headers(h, sigH)
	if err != nil {
		return p, err
	}
	v := vals[0]
	hexSig, ok := strings.CutPrefix(v, "sha256=")
	if !ok {
		return p, malformed(sigH, "does not start with sha256=")
	}
	raw, err := hex.DecodeString(hexSig)
	if err != nil {
		return p, malformed(sigH, "is not hex")
	}
	p.sigs = [][]byte{raw}
	p.id, err = single(h, idH)
	return p, err
}

func (githubScheme) mac(m hash.Hash, _ parsed, body []byte) { m.Write(body) }

func (githubScheme) header(h http.Header, p parsed, mac []byte) {
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac))
	if p.id != "" {
		h.Set("X-GitHub-Delivery", p.id)
	}
}

// shopifyScheme is Shopify's: X-Shopify-Hmac-Sha256 "<base64>" over the
// body; no timestamp; ID from X-Shopify-Webhook-Id.
type shopifyScheme struct{}

func (shopifyScheme) name() string                      { return "shopify" }
func (shopifyScheme) defaultFuture() time.Duration      { return DefaultTolerance }
func (shopifyScheme) key(secret string) ([]byte, error) { return []byte(secret), nil }

func (shopifyScheme) parse(r Request) (parsed, error) {
	h := r.Header
	const sigH, idH = "X-Shopify-Hmac-Sha256", "X-Shopify-Webhook-Id"
	var p parsed
	vals, err := headers(h, sigH)
	if err != nil {
		return p, err
	}
	v := vals[0]
	raw, err := base64.StdEncoding.Strict().DecodeString(v)
	if err != nil {
		return p, malformed(sigH, "is not base64")
	}
	p.sigs = [][]byte{raw}
	p.id, err = single(h, idH)
	return p, err
}

func (shopifyScheme) mac(m hash.Hash, _ parsed, body []byte) { m.Write(body) }

func (shopifyScheme) header(h http.Header, p parsed, mac []byte) {
	h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac))
	if p.id != "" {
		h.Set("X-Shopify-Webhook-Id", p.id)
	}
}

// slackScheme is Slack's: X-Slack-Signature "v0=<hex>" over
// "v0:<ts>:<body>", ts from X-Slack-Request-Timestamp; ID from the body's
// event_id when the body is JSON.
type slackScheme struct{}

func (slackScheme) name() string                      { return "slack" }
func (slackScheme) defaultFuture() time.Duration      { return DefaultTolerance }
func (slackScheme) key(secret string) ([]byte, error) { return []byte(secret), nil }

func (slackScheme) parse(r Request) (parsed, error) {
	h, body := r.Header, r.Body
	const sigH, tsH = "X-Slack-Signature", "X-Slack-Request-Timestamp"
	var p parsed
	vals, err := headers(h, sigH, tsH)
	if err != nil {
		return p, err
	}
	sigv, tsv := vals[0], vals[1]
	ts, err := parseUnix(tsH, tsv)
	if err != nil {
		return p, err
	}
	p.ts, p.hasTS = ts, true
	hexSig, ok := strings.CutPrefix(sigv, "v0=")
	if !ok {
		return p, malformed(sigH, "does not start with v0=")
	}
	raw, err := hex.DecodeString(hexSig)
	if err != nil {
		return p, malformed(sigH, "is not hex")
	}
	p.sigs = [][]byte{raw}
	if gjson.ValidBytes(body) {
		p.id = gjson.GetBytes(body, "event_id").String()
	}
	return p, nil
}

func (slackScheme) mac(m hash.Hash, p parsed, body []byte) {
	writeAll(m, v0, itoa(p.ts), colon, body)
}

func (slackScheme) header(h http.Header, p parsed, mac []byte) {
	h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(p.ts, 10))
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac))
}

// hookgateScheme is the common x-webhook-* pattern: x-webhook-id,
// x-webhook-timestamp, x-webhook-signature "<hex>" over "ts.body". The ID is
// not signed: prefer standard wherever the sender can be chosen.
type hookgateScheme struct{}

func (hookgateScheme) name() string                      { return "hookgate" }
func (hookgateScheme) defaultFuture() time.Duration      { return DefaultTolerance }
func (hookgateScheme) key(secret string) ([]byte, error) { return []byte(secret), nil }

func (hookgateScheme) parse(r Request) (parsed, error) {
	h := r.Header
	const sigH = "X-Webhook-Signature"
	p, sigv, err := idTimestampSignature(h, "X-Webhook-Id", "X-Webhook-Timestamp", sigH)
	if err != nil {
		return p, err
	}
	raw, err := hex.DecodeString(sigv)
	if err != nil {
		return p, malformed(sigH, "is not hex")
	}
	p.sigs = [][]byte{raw}
	return p, nil
}

func (hookgateScheme) mac(m hash.Hash, p parsed, body []byte) {
	writeAll(m, itoa(p.ts), dot, body)
}

func (hookgateScheme) header(h http.Header, p parsed, mac []byte) {
	h.Set("X-Webhook-Id", p.id)
	h.Set("X-Webhook-Timestamp", strconv.FormatInt(p.ts, 10))
	h.Set("X-Webhook-Signature", hex.EncodeToString(mac))
}
