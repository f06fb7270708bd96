package verify

// The public-key schemes: the provider signs with its private key and
// publishes the public key, which the receiver configures as its secret.
// A configured private key (PKCS#8 PEM) verifies too, and signs: hookgate
// sign, and a test that plays the provider.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// keyScheme is a scheme whose secrets are keys: it verifies a signature
// with a public key rather than an HMAC.
type keyScheme interface {
	scheme
	// readKey reads a configured secret: a public key verifies; a private
	// key verifies (its public half) and signs.
	readKey(secret string) (crypto.PublicKey, crypto.Signer, error)
	// content is the signed content of a request.
	content(p parsed, body []byte) []byte
	// verifyKey reports whether sig is pub's over content.
	verifyKey(pub crypto.PublicKey, content, sig []byte) bool
	// signKey signs content with priv.
	signKey(priv crypto.Signer, content []byte) ([]byte, error)
}

// keyScope is the bytes a public key's dedupe scope (Delivery's
// SecretFingerprint) derives from: its PKIX encoding.
func keyScope(pub crypto.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub) // a key readKey made: one it encodes
	return der
}

// privateKeyPEM reads a PKCS#8 PEM private key ("-----BEGIN PRIVATE
// KEY-----", as openssl genpkey writes it); ok is false for a secret that
// is not PEM, or is a PEM public key.
func privateKeyPEM(secret string) (crypto.Signer, bool, error) {
	block, _ := pem.Decode([]byte(strings.TrimSpace(secret)))
	if block == nil || block.Type == "PUBLIC KEY" { // a public key: the scheme reads it
		return nil, false, nil
	}
	if block.Type != "PRIVATE KEY" {
		return nil, true, errors.New("a PEM key must be a PKCS#8 PRIVATE KEY (openssl genpkey)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, true, errors.New("the PEM private key does not parse as PKCS#8")
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, true, errors.New("the PEM private key cannot sign")
	}
	return signer, true, nil
}

// ed25519Scheme is a provider's Ed25519 signature: sigHeader holds the
// signature of tsHeader's value, sep, then the body, under the key pair
// whose public key the provider shows (keyHex: 64 hex digits; else the
// base64 of its 32 bytes), the signature hex (sigHex) or base64. The
// delivery ID is idPath of the signed body.
type ed25519Scheme struct {
	named               string
	sigHeader, tsHeader string
	sep                 string
	keyHex, sigHex      bool
	idPath              string
}

// discord is Discord's interactions endpoint: X-Signature-Ed25519 (hex)
// over X-Signature-Timestamp then the body, under the application's Public
// Key (hex); the ID is the interaction's. telnyx is Telnyx's (API v2):
// telnyx-signature-ed25519 (base64) over telnyx-timestamp, "|", then the
// body, under the portal's Public Key (base64); the ID is the event's.
var (
	discord = ed25519Scheme{named: "discord", sigHeader: "X-Signature-Ed25519", tsHeader: "X-Signature-Timestamp",
		keyHex: true, sigHex: true, idPath: "id"}
	telnyx = ed25519Scheme{named: "telnyx", sigHeader: "Telnyx-Signature-Ed25519", tsHeader: "Telnyx-Timestamp",
		sep: "|", idPath: "data.id"}
)

func (s ed25519Scheme) name() string               { return s.named }
func (ed25519Scheme) defaultFuture() time.Duration { return DefaultTolerance }
func (s ed25519Scheme) key(string) ([]byte, error) {
	return nil, errors.New(s.named + " verifies with a public key")
}

func (s ed25519Scheme) readKey(secret string) (crypto.PublicKey, crypto.Signer, error) {
	priv, isPEM, err := privateKeyPEM(secret)
	switch {
	case err != nil:
		return nil, nil, err
	case isPEM:
		ed, ok := priv.(ed25519.PrivateKey)
		if !ok {
			return nil, nil, errors.New(s.named + " signs with an Ed25519 key")
		}
		return ed.Public(), ed, nil
	}
	secret = strings.TrimSpace(secret)
	var raw []byte
	if s.keyHex {
		raw, err = hex.DecodeString(secret)
	} else {
		raw, err = base64.StdEncoding.DecodeString(secret)
	}
	if err != nil || len(raw) != ed25519.PublicKeySize {
		if s.keyHex {
			return nil, nil, errors.New(s.named + "'s public key is 64 hex digits (the application's Public Key)")
		}
		return nil, nil, errors.New(s.named + "'s public key is the base64 of 32 bytes (the portal's Public Key)")
	}
	return ed25519.PublicKey(raw), nil, nil
}

func (s ed25519Scheme) parse(r Request) (parsed, error) {
	var p parsed
	vals, err := headers(r.Header, s.sigHeader, s.tsHeader)
	if err != nil {
		return p, err
	}
	var sig []byte
	if s.sigHex {
		sig, err = hex.DecodeString(vals[0])
	} else {
		sig, err = base64.StdEncoding.Strict().DecodeString(vals[0])
	}
	if err != nil || len(sig) != ed25519.SignatureSize {
		return p, malformed(s.sigHeader, "is not an Ed25519 signature")
	}
	if p.ts, err = parseUnix(s.tsHeader, vals[1]); err != nil {
		return p, err
	}
	p.hasTS, p.rawTS, p.sigs = true, vals[1], [][]byte{sig}
	p.id = gjson.GetBytes(r.Body, s.idPath).String()
	return p, nil
}

func (s ed25519Scheme) content(p parsed, body []byte) []byte {
	return append([]byte(stampOf(p)+s.sep), body...)
}

func (ed25519Scheme) verifyKey(pub crypto.PublicKey, content, sig []byte) bool {
	k, ok := pub.(ed25519.PublicKey)
	return ok && ed25519.Verify(k, content, sig)
}

func (ed25519Scheme) signKey(priv crypto.Signer, content []byte) ([]byte, error) {
	return priv.Sign(rand.Reader, content, crypto.Hash(0))
}

func (ed25519Scheme) mac(hash.Hash, parsed, []byte) {}

func (s ed25519Scheme) header(h http.Header, p parsed, sig []byte) {
	if s.sigHex {
		h.Set(s.sigHeader, hex.EncodeToString(sig))
	} else {
		h.Set(s.sigHeader, base64.StdEncoding.EncodeToString(sig))
	}
	h.Set(s.tsHeader, stampOf(p))
}

// sendgridScheme is Twilio SendGrid's signed Event Webhook:
// X-Twilio-Email-Event-Webhook-Signature, the base64 ASN.1 ECDSA P-256
// signature of SHA-256 over the X-Twilio-Email-Event-Webhook-Timestamp
// header's value then the body, under the verification key SendGrid's
// settings show (the base64 of its PKIX DER, or a PEM PUBLIC KEY). Its
// body is a batch of events: no delivery ID, keyed by the body.
type sendgridScheme struct{}

const (
	sendgridSignature = "X-Twilio-Email-Event-Webhook-Signature"
	sendgridTimestamp = "X-Twilio-Email-Event-Webhook-Timestamp"
)

func (sendgridScheme) name() string                 { return "sendgrid" }
func (sendgridScheme) defaultFuture() time.Duration { return DefaultTolerance }
func (sendgridScheme) key(string) ([]byte, error) {
	return nil, errors.New("sendgrid verifies with a public key")
}

func (sendgridScheme) readKey(secret string) (crypto.PublicKey, crypto.Signer, error) {
	priv, isPEM, err := privateKeyPEM(secret)
	switch {
	case err != nil:
		return nil, nil, err
	case isPEM:
		ec, ok := priv.(*ecdsa.PrivateKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, nil, errors.New("sendgrid signs with an ECDSA P-256 key")
		}
		return &ec.PublicKey, ec, nil
	}
	der := []byte(nil)
	if block, _ := pem.Decode([]byte(strings.TrimSpace(secret))); block != nil {
		der = block.Bytes
	} else if der, err = base64.StdEncoding.DecodeString(strings.TrimSpace(secret)); err != nil {
		return nil, nil, errors.New("sendgrid's verification key is base64 (as its settings show) or PEM")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	ec, ok := pub.(*ecdsa.PublicKey)
	if err != nil || !ok || ec.Curve != elliptic.P256() {
		return nil, nil, errors.New("sendgrid's verification key is an ECDSA P-256 public key")
	}
	return ec, nil, nil
}

func (sendgridScheme) parse(r Request) (parsed, error) {
	var p parsed
	vals, err := headers(r.Header, sendgridSignature, sendgridTimestamp)
	if err != nil {
		return p, err
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(vals[0])
	if err != nil || len(sig) > 80 { // an ASN.1 P-256 signature is at most 72 bytes
		return p, malformed(sendgridSignature, "is not a base64 ECDSA signature")
	}
	if p.ts, err = parseUnix(sendgridTimestamp, vals[1]); err != nil {
		return p, err
	}
	p.hasTS, p.rawTS, p.sigs = true, vals[1], [][]byte{sig}
	return p, nil
}

func (sendgridScheme) content(p parsed, body []byte) []byte {
	sum := sha256.Sum256(append([]byte(stampOf(p)), body...))
	return sum[:]
}

func (sendgridScheme) verifyKey(pub crypto.PublicKey, digest, sig []byte) bool {
	k, ok := pub.(*ecdsa.PublicKey)
	return ok && ecdsa.VerifyASN1(k, digest, sig)
}

func (sendgridScheme) signKey(priv crypto.Signer, digest []byte) ([]byte, error) {
	return priv.Sign(rand.Reader, digest, crypto.SHA256)
}

func (sendgridScheme) mac(hash.Hash, parsed, []byte) {}

func (sendgridScheme) header(h http.Header, p parsed, sig []byte) {
	h.Set(sendgridSignature, base64.StdEncoding.EncodeToString(sig))
	h.Set(sendgridTimestamp, stampOf(p))
}

// stampOf is a parsed request's timestamp as the sender wrote it, or as
// Sign writes it.
func stampOf(p parsed) string {
	if p.rawTS != "" {
		return p.rawTS
	}
	return string(itoa(p.ts))
}

// verifyKeys reports whether any of p's signatures is one of v's public
// keys' over r's signed content, and which key's.
func (v *Verifier) verifyKeys(ks keyScheme, p parsed, body []byte) (int, bool) {
	content := ks.content(p, body)
	for i, pub := range v.pubKeys {
		for _, sig := range p.sigs {
			if ks.verifyKey(pub, content, sig) {
				return i, true
			}
		}
	}
	return -1, false
}

// keyHeaders signs p's content with v's private key, for SignRequest.
func (v *Verifier) keyHeaders(ks keyScheme, p parsed, body []byte) (http.Header, error) {
	if v.keySigner == nil {
		return nil, errors.New("a public key only verifies: give a PKCS#8 PEM private key to sign")
	}
	sig, err := ks.signKey(v.keySigner, ks.content(p, body))
	if err != nil {
		return nil, err
	}
	h := make(http.Header)
	ks.header(h, p, sig)
	return h, nil
}

// rsaSigner reads the secrets of a scheme that verifies without one (sns,
// pubsub): each must be an RSA private key in PKCS#8 PEM, the first of
// which signs; none, nil. why says why a secret is not needed.
func rsaSigner(secrets []string, why string) (*rsa.PrivateKey, error) {
	var signer *rsa.PrivateKey
	for i, secret := range secrets {
		priv, isPEM, err := privateKeyPEM(secret)
		rk, isRSA := priv.(*rsa.PrivateKey)
		switch {
		case err != nil:
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		case !isPEM || !isRSA:
			return nil, fmt.Errorf("secret %d: %s; to sign, give an RSA private key in PKCS#8 PEM, the key itself (--secret \"$(cat key.pem)\")", i+1, why)
		}
		if signer == nil {
			signer = rk
		}
	}
	return signer, nil
}
