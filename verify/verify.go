// Package verify checks webhook signatures: several provider schemes, several
// secrets per route (rotation), a timestamp window, and constant-time
// comparison over the raw body bytes. It imports no Caddy; gjson reads the
// delivery ID from the body for the schemes that keep it there.
package verify

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Errors returned by Verify. Callers branch on them with errors.Is; the
// wrapped message says which header and why, and never holds a secret or a
// signature.
var (
	// ErrMissingHeader means a header the scheme needs is absent.
	ErrMissingHeader = errors.New("missing header")
	// ErrMalformedHeader means a header is present but does not parse.
	ErrMalformedHeader = errors.New("malformed header")
	// ErrBadSignature means no signature of a known version matches any secret.
	ErrBadSignature = errors.New("bad signature")
	// ErrTimestampOutOfTolerance means the signed timestamp is too old or too
	// far in the future.
	ErrTimestampOutOfTolerance = errors.New("timestamp out of tolerance")
)

// DefaultTolerance is the default timestamp window, in each direction.
const DefaultTolerance = 5 * time.Minute

// Delivery is what a verified request tells about itself.
type Delivery struct {
	// ID is the delivery ID, from a header or the body, as the scheme
	// defines; empty when the request carries none.
	ID string
	// Timestamp is the signed timestamp; zero for schemes without one.
	Timestamp time.Time
	// Scheme names the scheme that verified the delivery.
	Scheme string
	// Key is what dedupe keys the delivery by, by default (DedupeKey).
	Key Key
	// SignatureSHA256 is the hex SHA-256 of the signature that verified,
	// when Key is KeySignature; empty otherwise.
	SignatureSHA256 string
	// Credentials names the headers that carry the scheme's signature and
	// signed timestamp (Verifier.CredentialHeaders; shared, read-only).
	Credentials []string
	// SecretFingerprint is a fingerprint of the secret that verified
	// (scope.go; never the secret), when Key is KeyBody: it scopes the
	// body's key to the endpoint's secret. Empty otherwise.
	SecretFingerprint string
}

// Verifier verifies requests of one scheme against a set of secrets.
// It is safe for concurrent use.
type Verifier struct {
	scheme scheme
	keys   [][]byte  // HMAC keys
	macs   []*macKey // the same keys, keyed once (macKey)
	// Ed25519 keys (standard's v1a): public keys verify; a private key
	// (from a whsk_ secret) also signs.
	publics []ed25519.PublicKey
	private ed25519.PrivateKey
	// The public-key schemes' keys (keyScheme): each verifies; keySigner,
	// from a private key, signs; keyScopes are their dedupe scopes.
	pubKeys   []crypto.PublicKey
	keySigner crypto.Signer
	keyScopes []*scope
	past      time.Duration
	future    time.Duration // < 0: no limit
	signsV1a  bool          // the first secret is a whsk_ key
	// rfc holds scheme rfc9421's keys by keyid; that scheme takes its own
	// path through Verify and SignRequest (rfc9421.go).
	rfc *rfc9421
	// sns holds scheme sns's configuration and certificates; that scheme
	// takes its own path too (sns.go).
	sns *sns
	// pubsub holds scheme pubsub's configuration and Google's keys; its
	// own path too (pubsub.go).
	pubsub *pubsub
	// learned holds the secrets handshakes gave (asana; learned.go).
	learned *learned

	// The handshakes' settings (handshake.go). handshakes is whether
	// the scheme or the options take part in any: most take part in none,
	// and Handshake answers them at once.
	handshakes  bool
	verifyToken string
	ceOrigins   []string
	ceRate      string
}

// Options tune a Verifier. The zero value means the scheme's defaults.
type Options struct {
	// Past is how old a timestamp may be. Zero means DefaultTolerance.
	Past time.Duration
	// Future is how far ahead of now a timestamp may be. Zero means the
	// scheme's default: DefaultTolerance, or no limit for stripe.
	Future time.Duration
	// HMAC configures the generic scheme "hmac"; it is required for it,
	// and ignored by the others.
	HMAC *HMAC
	// KeyIDs names each secret of scheme rfc9421, in order: a request's
	// keyid selects its key. Required by rfc9421, rejected by the others.
	KeyIDs []string
	// IDHeader names the header rfc9421 takes the delivery ID from, when
	// the signature covers it. Default Idempotency-Key.
	IDHeader string
	// VerifyToken is the token Meta's subscription handshake must carry
	// (scheme meta).
	VerifyToken string
	// CloudEventsOrigins are the origins whose CloudEvents OPTIONS
	// handshake is allowed; none means the handshake is not answered.
	CloudEventsOrigins []string
	// CloudEventsRate is the WebHook-Allowed-Rate answered to an allowed
	// origin. Default "*".
	CloudEventsRate string
	// SNS configures scheme sns (sns.go); required by it.
	SNS *SNS
	// PubSub configures scheme pubsub (pubsub.go); required by it.
	PubSub *PubSub
	// Client makes the fetches of the schemes that fetch their provider's
	// keys (sns, pubsub); nil means a client with the system's roots. Its
	// redirects are never followed, and its timeout is at most 5s.
	Client *http.Client
	// Learned stores the secrets an endpoint's handshake gives (asana,
	// learned.go); with it, asana needs no configured secret. Nil means
	// only the configured secrets verify.
	Learned Learned
}

// Request is what a signature can cover: the method, the URL as the sender
// called it, the headers and the raw body.
type Request struct {
	// Method is the request method; "" means POST.
	Method string
	// URL is the absolute URL the sender called (scheme, host, path and
	// query). Only the schemes that sign the target read it (twilio,
	// rfc9421).
	URL    string
	Header http.Header
	Body   []byte
	// Context bounds what verifying r fetches (sns's certificates) and
	// reads (a learned secret); nil means context.Background.
	Context context.Context
	// Endpoint is the path r arrived at, before any rewrite: the
	// endpoint a learned secret belongs to (asana).
	Endpoint string
}

// New returns a Verifier for the named scheme. At least one secret is
// required; a request is genuine when any secret matches. Secret values
// never appear in the returned error.
func New(schemeName string, secrets []string, opts Options) (*Verifier, error) {
	var s scheme
	var err error
	p, isProvider := provider(schemeName)
	switch {
	case schemeName == "hmac":
		if opts.HMAC == nil {
			return nil, errors.New("scheme hmac needs its configuration: signature_header, algorithm, encoding, prefix, content")
		}
		s, err = newHMACScheme(*opts.HMAC)
	case opts.HMAC != nil:
		return nil, fmt.Errorf("an hmac configuration is for scheme hmac, not %s", schemeName)
	case isProvider && p.HMAC != nil:
		var hs *hmacScheme
		if hs, err = newHMACScheme(*p.HMAC); err == nil {
			hs.named = p.Name
			s = hs
		}
	case isProvider:
		s, err = lookup(p.Scheme)
	default:
		s, err = lookup(schemeName)
	}
	if err != nil {
		return nil, err
	}
	if opts.SNS != nil && s.name() != "sns" {
		return nil, fmt.Errorf("topics, cert_hosts and confirm_subscriptions are scheme sns's, not %s's", schemeName)
	}
	if opts.PubSub != nil && s.name() != "pubsub" {
		return nil, fmt.Errorf("audience, service_accounts and jwks_url are scheme pubsub's, not %s's", schemeName)
	}
	learns := slices.Contains(learningSchemes, s.name())
	if opts.Learned != nil && !learns {
		return nil, fmt.Errorf("learned secrets are asana's handshake's, not %s's", schemeName)
	}
	if len(secrets) == 0 && s.name() != "sns" && s.name() != "pubsub" && opts.Learned == nil {
		return nil, fmt.Errorf("scheme %s: at least one secret is required", schemeName)
	}
	v := &Verifier{scheme: s, past: opts.Past, future: opts.Future,
		verifyToken: opts.VerifyToken, ceOrigins: opts.CloudEventsOrigins, ceRate: opts.CloudEventsRate}
	if v.ceRate == "" {
		v.ceRate = "*"
	}
	v.handshakes = len(v.ceOrigins) > 0 || slices.Contains(handshakeSchemes, s.name())
	if opts.VerifyToken != "" && schemeName != "meta" {
		return nil, fmt.Errorf("verify_token is Meta's handshake token: it needs scheme meta, not %s", schemeName)
	}
	if opts.Past < 0 || opts.Future < 0 {
		return nil, fmt.Errorf("tolerance must not be negative")
	}
	if v.past == 0 {
		v.past = DefaultTolerance
	}
	if v.future == 0 {
		v.future = s.defaultFuture()
	}
	switch s.name() {
	case "rfc9421":
		if v.rfc, err = newRFC9421(secrets, opts); err != nil {
			return nil, err
		}
		return v, nil
	case "sns":
		if len(opts.KeyIDs) > 0 {
			return nil, errors.New("scheme sns: keyids are for scheme rfc9421 only")
		}
		if v.sns, err = newSNS(secrets, opts); err != nil {
			return nil, err
		}
		// Its handshake is answered only when it is to be confirmed.
		v.handshakes = len(v.ceOrigins) > 0 || v.sns.cfg.ConfirmSubscriptions
		return v, nil
	case "pubsub":
		if len(opts.KeyIDs) > 0 {
			return nil, errors.New("scheme pubsub: keyids are for scheme rfc9421 only")
		}
		if v.pubsub, err = newPubSub(secrets, opts); err != nil {
			return nil, err
		}
		return v, nil
	}
	if len(opts.KeyIDs) > 0 {
		return nil, fmt.Errorf("scheme %s: keyids are for scheme rfc9421 only", schemeName)
	}
	for i, secret := range secrets {
		if secret == "" {
			return nil, fmt.Errorf("secret %d is empty", i+1)
		}
		if ks, ok := s.(keyScheme); ok {
			pub, priv, err := ks.readKey(secret)
			if err != nil {
				return nil, fmt.Errorf("secret %d: %w", i+1, err)
			}
			v.pubKeys = append(v.pubKeys, pub)
			v.keyScopes = append(v.keyScopes, newScope(keyScope(pub)))
			if priv != nil && v.keySigner == nil {
				v.keySigner = priv
			}
			continue
		}
		if pub, priv, ok, err := asymmetricKey(s, secret); ok || err != nil {
			if err != nil {
				return nil, fmt.Errorf("secret %d: %w", i+1, err)
			}
			v.publics = append(v.publics, pub)
			if priv != nil && v.private == nil {
				v.private = priv
				v.signsV1a = i == 0
			}
			continue
		}
		k, err := s.key(secret)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		v.keys = append(v.keys, k)
		v.macs = append(v.macs, newMACKey(newHashOf(s), k))
	}
	if _, ok := s.(standardScheme); ok {
		v.scheme = standardScheme{ed25519: len(v.publics) > 0}
	}
	if opts.Learned != nil {
		newHash := newHashOf(s)
		v.learned = &learned{store: opts.Learned, keys: map[string]*macKey{},
			newMAC: func(raw []byte) *macKey { return newMACKey(newHash, raw) }}
	}
	return v, nil
}

// Handshake answers r when it is an endpoint handshake this Verifier's
// scheme and options take part in; ok is false for any other request,
// which Verify then judges. The signed handshakes (slack, zoom) are
// answered only when their signature verifies at now; r.URL must be set
// for the ones that read the query (meta, twitter) and for OPTIONS.
func (v *Verifier) Handshake(r Request, now time.Time) (a Answer, ok bool) {
	if !v.handshakes {
		return Answer{}, false
	}
	return v.handshake(r, now)
}

// Verify checks the request headers and raw body at time now. On success it
// returns what the request says of itself. It compares every candidate
// signature against every secret in constant time per comparison.
func (v *Verifier) Verify(r Request, now time.Time) (Delivery, error) {
	d, _, err := v.verify(r, now)
	if err == nil {
		d.Scheme = v.scheme.name()
		d.Credentials = v.CredentialHeaders()
	}
	return d, err
}

// DedupeKey is the idempotency key dedupe keys d by, by default, as its
// Key says: its ID (KeyID); <scheme>:<secret fingerprint>:<body's
// SHA-256> (KeyBody); <scheme>:<signature's SHA-256> (KeySignature).
// bodySHA256 returns the body's SHA-256 in hex; it is called for KeyBody
// only. DedupeKey is "" when the part it needs is empty (a delivery
// without an ID, or one that did not verify).
func (d *Delivery) DedupeKey(bodySHA256 func() string) string {
	switch {
	case d.Key == KeyBody && d.SecretFingerprint != "":
		return d.Scheme + ":" + d.SecretFingerprint + ":" + bodySHA256()
	case d.Key == KeySignature && d.SignatureSHA256 != "":
		return d.Scheme + ":" + d.SignatureSHA256
	case d.Key == KeyID:
		return d.ID
	}
	return ""
}

// verify is Verify, and says which HMAC key matched (an index of keys; -1
// for none, or an Ed25519 key).
func (v *Verifier) verify(r Request, now time.Time) (Delivery, int, error) {
	if v.rfc != nil {
		d, err := v.verifyRFC9421(r, now)
		return d, -1, err
	}
	if v.sns != nil {
		d, _, err := v.sns.verify(r, now, v.past, v.future)
		return d, -1, err
	}
	if v.pubsub != nil {
		d, err := v.pubsub.verify(r, now, v.past, v.future)
		return d, -1, err
	}
	body := r.Body
	p, err := v.scheme.parse(r)
	defer p.free()
	if err != nil {
		return Delivery{}, -1, err
	}
	matched, key := false, -1
	for i, k := range v.macs {
		for p.alt = 0; p.alt < max(1, len(p.contents)); p.alt++ {
			m := k.get()
			v.scheme.mac(m, p, body)
			mac := m.mac()
			for _, sig := range p.sigs {
				if hmac.Equal(mac, sig) {
					matched, key = true, i
				}
			}
			k.put(m)
		}
	}
	var learnedKey *macKey // the endpoint's learned secret, when it matched
	if v.learned != nil && !matched && len(p.sigs) > 0 {
		ctx := r.Context
		if ctx == nil {
			ctx = context.Background()
		}
		lk, err := v.learned.key(ctx, r.Endpoint)
		if err != nil {
			return Delivery{}, -1, err
		}
		if lk != nil && v.macMatches(lk, &p, body) {
			matched, learnedKey = true, lk
		}
	}
	keyed := -1 // the public key that matched (keyScheme)
	switch s := v.scheme.(type) {
	case keyScheme:
		keyed, matched = v.verifyKeys(s, p, body)
	case tokenScheme:
		key, matched = v.verifyTokens(s, r)
	}
	if len(v.publics) > 0 && len(p.asym) > 0 {
		content := signedContent(p, body)
		for _, pub := range v.publics {
			for _, sig := range p.asym {
				if ed25519.Verify(pub, content, sig) {
					matched = true
				}
			}
		}
	}
	if !matched {
		return Delivery{}, -1, ErrBadSignature
	}
	d := Delivery{ID: p.id, Key: v.keyBy(p.id)}
	switch {
	case d.Key == KeySignature:
		sum := sha256.Sum256(p.sigs[0])
		d.SignatureSHA256 = hex.EncodeToString(sum[:])
	case d.Key == KeyBody && key >= 0: // the body-keyed schemes verify by HMAC
		d.SecretFingerprint = v.macs[key].scope.fingerprint()
	case d.Key == KeyBody && keyed >= 0: // or by a public key
		d.SecretFingerprint = v.keyScopes[keyed].fingerprint()
	case d.Key == KeyBody && learnedKey != nil: // or by a learned secret
		d.SecretFingerprint = learnedKey.scope.fingerprint()
	}
	if p.hasTS {
		// Compare instants, not durations: a far-away timestamp would
		// saturate now.Sub and overflow when negated.
		d.Timestamp = time.Unix(p.ts, 0)
		if d.Timestamp.Before(now.Add(-v.past)) {
			return Delivery{}, -1, fmt.Errorf("%w: %s old, tolerance %s", ErrTimestampOutOfTolerance, now.Sub(d.Timestamp).Truncate(time.Second), v.past)
		}
		if v.future >= 0 && d.Timestamp.After(now.Add(v.future)) {
			return Delivery{}, -1, fmt.Errorf("%w: %s in the future, tolerance %s", ErrTimestampOutOfTolerance, d.Timestamp.Sub(now).Truncate(time.Second), v.future)
		}
	}
	return d, key, nil
}

// macMatches reports whether one of p's signatures is k's MAC of the
// signed content, as verify's loop over the configured keys does.
func (v *Verifier) macMatches(k *macKey, p *parsed, body []byte) bool {
	matched := false
	for p.alt = 0; p.alt < max(1, len(p.contents)); p.alt++ {
		m := k.get()
		v.scheme.mac(m, *p, body)
		mac := m.mac()
		for _, sig := range p.sigs {
			if hmac.Equal(mac, sig) {
				matched = true
			}
		}
		k.put(m)
	}
	return matched
}

// Sign returns the headers a genuine sender adds to body, signed with the
// first secret. id and ts are used by the schemes that carry them. It is
// SignRequest for a POST to no URL: for the schemes that sign the URL
// (SignsURL), which need one, it returns nil.
func (v *Verifier) Sign(id string, ts time.Time, body []byte) http.Header {
	h, err := v.SignRequest(Request{Body: body}, id, ts)
	if err != nil {
		return nil
	}
	return h
}

// SignsURL reports whether the scheme signs the request's method or URL,
// so that SignRequest needs them.
func (v *Verifier) SignsURL() bool {
	if h, ok := v.scheme.(*hmacScheme); ok {
		return h.signsTarget
	}
	_, ok := v.scheme.(targetScheme)
	return ok
}

// targetScheme is a scheme whose signed content covers more of the
// request than the body and its own headers: prepare fills in what Sign
// needs from r.
type targetScheme interface {
	prepare(r Request, p *parsed) error
}

// SignRequest returns the headers a genuine sender adds to r, signed with
// the first secret. id and ts are used by the schemes that carry them.
func (v *Verifier) SignRequest(r Request, id string, ts time.Time) (http.Header, error) {
	body := r.Body
	p := parsed{id: id, ts: ts.Unix(), hasTS: true}
	defer p.free()
	if t, ok := v.scheme.(targetScheme); ok {
		if err := t.prepare(r, &p); err != nil {
			return nil, err
		}
	}
	if v.rfc != nil {
		return v.signRFC9421(r, id, ts)
	}
	if v.sns != nil {
		return nil, errors.New("sns signs inside the body: use SignMessage")
	}
	if _, ok := v.scheme.(mailgunScheme); ok {
		return nil, errors.New("mailgun signs inside the body: use SignMessage")
	}
	if v.pubsub != nil {
		return v.pubsub.sign(r, ts)
	}
	if hs, ok := v.scheme.(*hmacScheme); ok {
		p.rawTS = hs.stamp(ts)
	}
	if ks, ok := v.scheme.(keyScheme); ok {
		return v.keyHeaders(ks, p, body)
	}
	if ts, ok := v.scheme.(tokenScheme); ok {
		return v.tokenHeaders(ts)
	}
	if v.signsV1a || len(v.keys) == 0 {
		h := make(http.Header)
		if v.private != nil {
			sig := ed25519.Sign(v.private, signedContent(p, body))
			v.scheme.header(h, p, nil)
			h.Set("Webhook-Signature", "v1a,"+base64.StdEncoding.EncodeToString(sig))
		}
		return h, nil
	}
	m := v.macs[0].get()
	defer v.macs[0].put(m)
	v.scheme.mac(m, p, body)
	h := make(http.Header)
	v.scheme.header(h, p, m.mac())
	return h, nil
}

// CanSign reports whether the Verifier holds a key that signs: an HMAC
// secret, or a whsk_ private key (a whpk_ public key only verifies).
func (v *Verifier) CanSign() bool {
	return len(v.keys) > 0 || v.private != nil || v.keySigner != nil || (v.rfc != nil && v.rfc.signer != "") ||
		(v.sns != nil && v.sns.signer != nil) || (v.pubsub != nil && v.pubsub.signer != nil)
}

// SignMessage returns the headers and the body a genuine sender sends for
// r, signed with the first secret: r's body, but for the schemes that
// sign inside it (sns, mailgun), which return it with their signature's
// fields.
func (v *Verifier) SignMessage(r Request, id string, ts time.Time) (http.Header, []byte, error) {
	if v.sns != nil {
		return v.sns.sign(r.Body, id, ts)
	}
	if _, ok := v.scheme.(mailgunScheme); ok {
		return v.signMailgun(r, id, ts)
	}
	h, err := v.SignRequest(r, id, ts)
	return h, r.Body, err
}

// Schemes lists the names New takes: the catalogue's providers and the
// schemes that are no provider's (rfc9421), in name order, then hmac, the
// generic one.
func Schemes() []string {
	var names []string
	for _, p := range catalogue {
		names = append(names, p.Name)
	}
	for _, s := range schemes {
		if !slices.Contains(names, s.name()) {
			names = append(names, s.name())
		}
	}
	slices.Sort(names)
	return append(names, "hmac")
}

// parsed is what a scheme reads from the headers: the candidate signatures
// (raw MAC bytes), the timestamp if the scheme signs one, and the delivery ID.
type parsed struct {
	id    string
	ts    int64
	hasTS bool
	sigs  [][]byte
	asym  [][]byte // standard's v1a (Ed25519) signatures
	rawTS string   // the timestamp as written, for schemes that sign it so (hmac)
	// method and url are the request's, for an hmac content that signs
	// them.
	method, url string
	// contents are the forms of the signed content a sender may have
	// signed, for the schemes that build it from the request (twilio: the
	// URL with and without its port); mac signs contents[alt].
	contents [][]byte
	alt      int
	// form is twilio's form parameters, signed after contents[alt];
	// pooled, so free gives it back.
	form *twilioForm
}

// free gives back what parsing took from a pool.
func (p *parsed) free() {
	if p.form != nil {
		p.form.free()
		p.form = nil
	}
}

// scheme is one provider's signature format.
type scheme interface {
	name() string
	// key turns a configured secret into HMAC key bytes.
	key(secret string) ([]byte, error)
	// defaultFuture is the default future tolerance; < 0 means no limit.
	defaultFuture() time.Duration
	// parse reads signatures, timestamp and ID from the request.
	parse(r Request) (parsed, error)
	// mac writes the signed content of the request into h, a keyed
	// HMAC state (of SHA-256, or of the hash a hasher scheme names).
	mac(h hash.Hash, p parsed, body []byte)
	// header writes the signature headers a sender adds.
	header(h http.Header, p parsed, mac []byte)
}

var schemes = []scheme{standardScheme{}, stripeScheme{}, githubScheme{}, shopifyScheme{}, slackScheme{}, hookgateScheme{}, zoomScheme{}, metaScheme{}, twitterScheme{}, twilioScheme{}, rfc9421Scheme{},
	discord, sendgridScheme{}, telnyx, snsScheme{}, pubsubScheme{}, mailgunScheme{},
	tokenScheme{named: "gitlab", in: "X-Gitlab-Token"},
	tokenScheme{named: "postmark", in: "Authorization", basic: true},
	tokenScheme{named: "okta", in: "Authorization"},
	tokenScheme{named: "figma", body: figmaPasscode, where: "passcode"},
	tokenScheme{named: "msgraph", body: graphClientStates, where: "clientState in each notification of value"}}

func lookup(name string) (scheme, error) {
	for _, s := range schemes {
		if s.name() == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unknown scheme %q (want one of %v)", name, Schemes())
}

// macKey is one secret's HMAC, keyed once. hmac.New hashes the key into
// its inner and outer pads, two compressions and five allocations; each
// verification instead takes a keyed state from the pool, whose Reset
// restores the pads without rehashing them. A state never leaves the
// goroutine that took it until it is put back.
type macKey struct {
	raw   []byte
	pool  sync.Pool // of *keyedMAC
	scope *scope    // the secret's fingerprint (scope.go)
}

// keyedMAC is a keyed HMAC state, with room for its sum.
type keyedMAC struct {
	hash.Hash
	sum []byte
}

func newMACKey(newHash func() hash.Hash, raw []byte) *macKey {
	k := &macKey{raw: raw, scope: newScope(raw)}
	k.pool.New = func() any {
		m := hmac.New(newHash, raw)
		return &keyedMAC{Hash: m, sum: make([]byte, 0, m.Size())}
	}
	return k
}

// get takes a keyed state, reset to the key alone.
func (k *macKey) get() *keyedMAC {
	m := k.pool.Get().(*keyedMAC)
	m.Reset()
	return m
}

// mac is the sum of what m was written, in m's own buffer: valid until m
// is put back.
func (m *keyedMAC) mac() []byte {
	m.sum = m.Sum(m.sum[:0])
	return m.sum
}

// put gives m back; neither m nor its sum may be used after.
func (k *macKey) put(m *keyedMAC) { k.pool.Put(m) }

// hasher is a scheme whose HMAC is not HMAC-SHA256.
type hasher interface {
	newHash() hash.Hash
}

func newHashOf(s scheme) func() hash.Hash {
	if h, ok := s.(hasher); ok {
		return h.newHash
	}
	return sha256.New
}

// parseUnix parses a unix-seconds timestamp header value. Only the
// canonical decimal form is accepted: the MAC covers the canonical number,
// so "007" or "+7" would otherwise verify against the signature of "7".
func parseUnix(header, v string) (int64, error) {
	ts, err := strconv.ParseInt(v, 10, 64)
	if err != nil || !canonicalDecimal(v) {
		return 0, fmt.Errorf("%w: %s is not a unix timestamp in canonical decimal", ErrMalformedHeader, header)
	}
	return ts, nil
}

// canonicalDecimal reports whether v is a non-negative integer written as
// strconv.FormatInt writes it: digits only, no leading zero but in "0".
func canonicalDecimal(v string) bool {
	if v == "" || (v[0] == '0' && len(v) > 1) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// single returns the one value of header name, "" when absent. A header
// given more than once is malformed: a second, unsigned delivery ID would
// otherwise be forwarded beside the signed one.
func single(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", malformed(name, "is given more than once")
}

// Key says what dedupe keys a verified request by, by default.
type Key int

const (
	// KeyID is the delivery ID the signature covers.
	KeyID Key = iota
	// KeyBody is the body's hash, within the scope of the secret that
	// verified (Delivery.SecretFingerprint): the scheme signs no delivery
	// ID, so a captured body would verify under any ID (github, shopify,
	// zoom, meta, twitter; rfc9421 when its signature covers none; hmac
	// when its content does not sign {id}).
	KeyBody
	// KeySignature is the signature's hash (Delivery.SignatureSHA256):
	// the scheme signs no ID, and copies of one request can differ in
	// what it does not sign (twilio: the order and repetition of form
	// parameters, the port), yet carry one signature; or the request
	// carries no ID at all, and its signature covers all of it (slack's
	// slash commands and interactions). Twilio's retries carry it too.
	KeySignature
)

// keyBy says what dedupe keys a request of v's scheme, verified with
// delivery ID id, by. rfc9421 decides per signature (verifySignature).
func (v *Verifier) keyBy(id string) Key {
	switch s := v.scheme.(type) {
	case githubScheme, shopifyScheme, zoomScheme, metaScheme, twitterScheme:
		return KeyBody
	case *hmacScheme:
		if !s.signsID() {
			return KeyBody
		}
	case twilioScheme:
		return KeySignature
	case sendgridScheme, tokenScheme:
		return KeyBody
	case ed25519Scheme:
		if id == "" {
			return KeyBody
		}
	case slackScheme:
		if id == "" {
			return KeySignature
		}
	}
	return KeyID
}

func missing(header string) error {
	return fmt.Errorf("%w: %s", ErrMissingHeader, header)
}

func malformed(header, why string) error {
	return fmt.Errorf("%w: %s %s", ErrMalformedHeader, header, why)
}
