package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
	"golang.org/x/net/http/httpguts"
)

// RFC 9421 HTTP Message Signatures, with RFC 9530's Content-Digest.
//
// A request carries Signature-Input and Signature, two dictionaries
// (RFC 8941) keyed by label. The verifier considers the signatures whose
// covered components include "content-digest" (the field itself, without
// parameters): Content-Digest binds the body, and a signature that does not
// cover it does not vouch for the body. Each one's keyid selects a
// configured key, whose type decides the algorithm (an alg parameter, when
// given, must agree); created is required and must lie within the
// tolerance, expires is honoured; the signature base is rebuilt from the
// request (RFC 9421 § 2.5) and checked; then Content-Digest (sha-256 and
// sha-512 members; others are ignored) is checked against the body. The
// request is genuine when one such signature passes.
//
// What is refused, and how: no signature covering content-digest, a
// missing created, a covered component this implementation cannot rebuild
// (@status, a trailer, req, sf on a field of unknown type, an unknown
// parameter or derived component) are malformed (400); a covered field
// that is absent is missing (400); an unknown keyid, a mismatching alg, a
// signature or Content-Digest that does not match are a bad signature
// (401); a created out of tolerance or a past expires is a timestamp out of
// tolerance (401).

// rfc9421Scheme names the scheme; its requests take their own path through
// Verify and SignRequest (verifyRFC9421, signRFC9421), which read Verifier.rfc.
type rfc9421Scheme struct{}

// Bounds on the work an unsigned request can ask for: the signatures
// tried (of those covering content-digest), the components one covers,
// and the signature base's size.
const (
	maxRFCSignatures = 4
	maxComponents    = 32
	maxBase          = 64 << 10
)

func (rfc9421Scheme) name() string                 { return "rfc9421" }
func (rfc9421Scheme) defaultFuture() time.Duration { return DefaultTolerance }

// key reads an HMAC key as the standard scheme does: whsec_<base64>.
func (rfc9421Scheme) key(secret string) ([]byte, error) { return standardScheme{}.key(secret) }

// parse, mac and header are the per-MAC steps of the other schemes. RFC
// 9421 has one signature base per signature, chosen by its keyid, so
// Verify and SignRequest never reach these.
func (rfc9421Scheme) parse(Request) (parsed, error) {
	return parsed{}, errors.New("rfc9421 is verified by verifyRFC9421")
}
func (rfc9421Scheme) mac(hash.Hash, parsed, []byte)      {}
func (rfc9421Scheme) header(http.Header, parsed, []byte) {}

// prepare checks that the request to sign has a target URL: the signature
// covers @target-uri.
func (rfc9421Scheme) prepare(r Request, _ *parsed) error {
	_, err := parseTarget(r.URL)
	return err
}

// rfc9421 holds the keys of scheme rfc9421 by keyid.
type rfc9421 struct {
	keys map[string]rfcKey
	// signer is the keyid of the first key that signs; "" when every key
	// is a whpk_ public key.
	signer string
	// idHeader is the header whose covered value is the delivery ID,
	// lowercased as a component name.
	idHeader string
}

// rfcKey is one configured key: an HMAC key, or an Ed25519 public key and,
// for a whsk_ seed, its private key.
type rfcKey struct {
	hmac  []byte
	pub   ed25519.PublicKey
	priv  ed25519.PrivateKey
	scope *scope // the key's fingerprint, for a delivery keyed by its body
}

// alg is the RFC 9421 algorithm the key's type decides.
func (k rfcKey) alg() string {
	if k.hmac != nil {
		return "hmac-sha256"
	}
	return "ed25519"
}

func (k rfcKey) signs() bool { return k.hmac != nil || k.priv != nil }

// newRFC9421 reads the secrets of scheme rfc9421, each named by the keyid
// at the same index.
func newRFC9421(secrets []string, opts Options) (*rfc9421, error) {
	if len(opts.KeyIDs) != len(secrets) {
		return nil, fmt.Errorf("scheme rfc9421: each secret needs its keyid (%d secrets, %d keyids)", len(secrets), len(opts.KeyIDs))
	}
	idHeader := opts.IDHeader
	if idHeader == "" {
		idHeader = "Idempotency-Key"
	}
	if !httpguts.ValidHeaderFieldName(idHeader) {
		return nil, fmt.Errorf("scheme rfc9421: id_header %q is not a header name", idHeader)
	}
	r := &rfc9421{keys: make(map[string]rfcKey, len(secrets)), idHeader: strings.ToLower(idHeader)}
	for i, secret := range secrets {
		keyID := opts.KeyIDs[i]
		if keyID == "" || !printableASCII(keyID) {
			return nil, fmt.Errorf("scheme rfc9421: keyid %d must be printable ASCII, not empty", i+1)
		}
		if _, dup := r.keys[keyID]; dup {
			return nil, fmt.Errorf("scheme rfc9421: keyid %q given twice", keyID)
		}
		if secret == "" {
			return nil, fmt.Errorf("secret %d is empty", i+1)
		}
		var k rfcKey
		pub, priv, asym, err := asymmetricKey(standardScheme{}, secret)
		switch {
		case err != nil:
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		case asym:
			k.pub, k.priv = pub, priv
		default:
			if k.hmac, err = (rfc9421Scheme{}).key(secret); err != nil {
				return nil, fmt.Errorf("secret %d: scheme rfc9421 keys are whsec_<base64> (HMAC), whpk_<base64> or whsk_<base64> (Ed25519): %w", i+1, err)
			}
		}
		if k.hmac != nil {
			k.scope = newScope(k.hmac)
		} else {
			k.scope = newScope(k.pub)
		}
		r.keys[keyID] = k
		if r.signer == "" && k.signs() {
			r.signer = keyID
		}
	}
	return r, nil
}

// rfcSignature is one labelled signature of a request.
type rfcSignature struct {
	label string
	input httpsfv.InnerList // the covered components, with the signature parameters
	sig   []byte
}

// covers reports whether the signature covers the plain field name.
func (s rfcSignature) covers(name string) bool {
	for _, c := range s.input.Items {
		if c.Value == name && len(c.Params.Names()) == 0 {
			return true
		}
	}
	return false
}

// parseSignatures reads Signature-Input and Signature: every label must be
// in both, each input an inner list, each signature a byte sequence.
func parseSignatures(h http.Header) ([]rfcSignature, error) {
	const inH, sigH = "Signature-Input", "Signature"
	inV, sigV := h.Values(inH), h.Values(sigH)
	if len(inV) == 0 {
		return nil, missing(inH)
	}
	if len(sigV) == 0 {
		return nil, missing(sigH)
	}
	inputs, err := httpsfv.UnmarshalDictionary(inV)
	if err != nil {
		return nil, malformed(inH, "is not a structured-field dictionary")
	}
	sigs, err := httpsfv.UnmarshalDictionary(sigV)
	if err != nil {
		return nil, malformed(sigH, "is not a structured-field dictionary")
	}
	var out []rfcSignature
	for _, label := range inputs.Names() {
		m, _ := inputs.Get(label)
		il, ok := m.(httpsfv.InnerList)
		if !ok {
			return nil, malformed(inH, label+" is not an inner list")
		}
		sm, ok := sigs.Get(label)
		if !ok {
			return nil, malformed(sigH, "has no "+label)
		}
		item, ok := sm.(httpsfv.Item)
		sig, isBytes := item.Value.([]byte)
		if !ok || !isBytes {
			return nil, malformed(sigH, label+" is not a byte sequence")
		}
		out = append(out, rfcSignature{label: label, input: il, sig: sig})
	}
	for _, label := range sigs.Names() {
		if _, ok := inputs.Get(label); !ok {
			return nil, malformed(inH, "has no "+label)
		}
	}
	if len(out) == 0 {
		return nil, malformed(inH, "has no signature")
	}
	return out, nil
}

// verifyRFC9421 verifies r under scheme rfc9421: the first signature that
// covers content-digest and passes makes it genuine. Otherwise the error is
// that of the first such signature whose keyid is configured, else of the
// first such signature.
func (v *Verifier) verifyRFC9421(r Request, now time.Time) (Delivery, error) {
	sigs, err := parseSignatures(r.Header)
	if err != nil {
		return Delivery{}, err
	}
	var first, firstKnown error
	tried := 0
	for _, s := range sigs {
		if !s.covers("content-digest") {
			continue
		}
		if tried++; tried > maxRFCSignatures {
			break // each costs a signature base: a header of thousands would cost seconds
		}
		d, known, err := v.verifySignature(s, r, now)
		if err == nil {
			if err = checkContentDigest(r.Header, r.Body); err == nil {
				return d, nil
			}
		}
		if first == nil {
			first = err
		}
		if known && firstKnown == nil {
			firstKnown = err
		}
	}
	switch {
	case firstKnown != nil:
		return Delivery{}, firstKnown
	case first != nil:
		return Delivery{}, first
	}
	return Delivery{}, malformed("Signature-Input", `has no signature that covers "content-digest"`)
}

// verifySignature checks one signature: its parameters, key, signature
// base and time window. known reports whether its keyid is configured.
// It does not check Content-Digest against the body.
func (v *Verifier) verifySignature(s rfcSignature, r Request, now time.Time) (d Delivery, known bool, err error) {
	const inH = "Signature-Input"
	p := s.input.Params
	var created, expires int64
	var hasCreated, hasExpires bool
	var keyID, alg string
	for _, name := range p.Names() {
		val, _ := p.Get(name)
		ok := true
		switch name {
		case "created":
			created, ok = val.(int64)
			hasCreated = true
		case "expires":
			expires, ok = val.(int64)
			hasExpires = true
		case "keyid":
			keyID, ok = val.(string)
		case "alg":
			alg, ok = val.(string)
		case "nonce", "tag":
			_, ok = val.(string)
		}
		if !ok {
			return d, false, malformed(inH, s.label+": "+name+" has the wrong type")
		}
	}
	if !hasCreated {
		return d, false, malformed(inH, s.label+" has no created")
	}
	if keyID == "" {
		return d, false, malformed(inH, s.label+" has no keyid")
	}
	key, known := v.rfc.keys[keyID]
	if !known {
		return d, false, fmt.Errorf("%w: %s: unknown keyid %q", ErrBadSignature, s.label, keyID)
	}
	if alg != "" && alg != key.alg() {
		return d, true, fmt.Errorf("%w: %s: alg %q does not match the key of keyid %q", ErrBadSignature, s.label, alg, keyID)
	}
	base, id, err := v.rfc.signatureBase(r, s.input)
	if err != nil {
		return d, true, err
	}
	if !key.verify(base, s.sig) {
		return d, true, fmt.Errorf("%w: %s", ErrBadSignature, s.label)
	}
	ts := time.Unix(created, 0)
	if ts.Before(now.Add(-v.past)) {
		return d, true, fmt.Errorf("%w: %s created %s ago, tolerance %s", ErrTimestampOutOfTolerance, s.label, now.Sub(ts).Truncate(time.Second), v.past)
	}
	if v.future >= 0 && ts.After(now.Add(v.future)) {
		return d, true, fmt.Errorf("%w: %s created %s in the future, tolerance %s", ErrTimestampOutOfTolerance, s.label, ts.Sub(now).Truncate(time.Second), v.future)
	}
	if hasExpires && !now.Before(time.Unix(expires, 0)) {
		return d, true, fmt.Errorf("%w: %s expired", ErrTimestampOutOfTolerance, s.label)
	}
	d = Delivery{ID: id, Timestamp: ts, Key: KeyID}
	if id == "" {
		// An uncovered ID is the sender's word only: keyed by the body,
		// within the key's scope.
		d.Key, d.SecretFingerprint = KeyBody, key.scope.fingerprint()
	}
	return d, true, nil
}

// verify checks sig over base with the key's algorithm.
func (k rfcKey) verify(base, sig []byte) bool {
	if k.hmac != nil {
		return hmac.Equal(hmacSHA256(k.hmac, base), sig)
	}
	return ed25519.Verify(k.pub, base, sig)
}

// sign signs base with the key's algorithm; the key signs (k.signs()).
func (k rfcKey) sign(base []byte) []byte {
	if k.hmac != nil {
		return hmacSHA256(k.hmac, base)
	}
	return ed25519.Sign(k.priv, base)
}

// checkContentDigest checks each sha-256 and sha-512 member of
// Content-Digest against the body; other algorithms are ignored, and at
// least one of the two must be there.
func checkContentDigest(h http.Header, body []byte) error {
	const digH = "Content-Digest"
	d, err := httpsfv.UnmarshalDictionary(h.Values(digH))
	if err != nil {
		return malformed(digH, "is not a structured-field dictionary")
	}
	checked := false
	for _, alg := range d.Names() {
		var sum []byte
		switch alg {
		case "sha-256":
			s := sha256.Sum256(body)
			sum = s[:]
		case "sha-512":
			s := sha512.Sum512(body)
			sum = s[:]
		default:
			continue
		}
		m, _ := d.Get(alg)
		item, _ := m.(httpsfv.Item)
		got, ok := item.Value.([]byte)
		if !ok {
			return malformed(digH, alg+" is not a byte sequence")
		}
		if !bytes.Equal(got, sum) {
			return fmt.Errorf("%w: Content-Digest %s does not match the body", ErrBadSignature, alg)
		}
		checked = true
	}
	if !checked {
		return malformed(digH, "has no sha-256 or sha-512 digest")
	}
	return nil
}

// signRFC9421 signs r with the first key that signs: it covers @method,
// @target-uri, content-type (when r has one), content-digest and, when id
// is given, the id header, with created, keyid and alg, under label sig1.
// It returns Content-Digest (sha-256), Signature-Input, Signature and the
// id header.
func (v *Verifier) signRFC9421(r Request, id string, ts time.Time) (http.Header, error) {
	if v.rfc.signer == "" {
		return nil, errors.New("scheme rfc9421: no key signs: a whpk_ public key only verifies")
	}
	out := make(http.Header)
	sum := sha256.Sum256(r.Body)
	digest := httpsfv.NewDictionary()
	digest.Add("sha-256", httpsfv.NewItem(sum[:]))
	dv, err := httpsfv.Marshal(digest)
	if err != nil {
		return nil, err
	}
	out.Set("Content-Digest", dv)
	names := []string{"@method", "@target-uri"}
	if r.Header.Get("Content-Type") != "" {
		names = append(names, "content-type")
	}
	names = append(names, "content-digest")
	if id != "" {
		out.Set(v.rfc.idHeader, id)
		names = append(names, v.rfc.idHeader)
	}
	h := r.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	for k, vs := range out {
		h[k] = vs
	}
	r.Header = h
	components := make([]httpsfv.Item, len(names))
	for i, n := range names {
		components[i] = httpsfv.NewItem(n)
	}
	key := v.rfc.keys[v.rfc.signer]
	params := httpsfv.NewParams()
	params.Add("created", ts.Unix())
	params.Add("keyid", v.rfc.signer)
	params.Add("alg", key.alg())
	sig, err := v.rfc.signWith(r, "sig1", v.rfc.signer, httpsfv.InnerList{Items: components, Params: params})
	if err != nil {
		return nil, err
	}
	for k, vs := range sig {
		out[k] = vs
	}
	return out, nil
}

// signWith signs r with the key of keyID over input (the covered
// components and the signature parameters, as given) and returns
// Signature-Input and Signature for label.
func (k *rfc9421) signWith(r Request, label, keyID string, input httpsfv.InnerList) (http.Header, error) {
	base, _, err := k.signatureBase(r, input)
	if err != nil {
		return nil, err
	}
	in := httpsfv.NewDictionary()
	in.Add(label, input)
	sig := httpsfv.NewDictionary()
	sig.Add(label, httpsfv.NewItem(k.keys[keyID].sign(base)))
	iv, err := httpsfv.Marshal(in)
	if err != nil {
		return nil, err
	}
	sv, err := httpsfv.Marshal(sig)
	if err != nil {
		return nil, err
	}
	return http.Header{"Signature-Input": {iv}, "Signature": {sv}}, nil
}

// signatureBase builds the signature base of RFC 9421 § 2.5 for input (the
// covered components and the signature parameters) over r. id is the
// delivery ID: the value of the id header when input covers it.
func (k *rfc9421) signatureBase(r Request, input httpsfv.InnerList) (base []byte, id string, err error) {
	const inH = "Signature-Input"
	if len(input.Items) > maxComponents {
		return nil, "", malformed(inH, fmt.Sprintf("covers %d components, over %d", len(input.Items), maxComponents))
	}
	dicts := map[string]*httpsfv.Dictionary{} // each field parsed once, however many ;key components read it
	var b bytes.Buffer
	var t *target // read once, by the first component that needs it
	readURL := func() (*target, error) {
		var err error
		if t == nil {
			t, err = parseTarget(r.URL)
		}
		return t, err
	}
	seen := make(map[string]bool, len(input.Items))
	for _, c := range input.Items {
		name, ok := c.Value.(string)
		if !ok {
			return nil, "", malformed(inH, "has a component that is not a string")
		}
		ident, err := httpsfv.Marshal(c)
		if err != nil {
			return nil, "", malformed(inH, "has a component that does not serialize")
		}
		canon := canonicalIdentifier(name, c.Params)
		if seen[canon] {
			return nil, "", malformed(inH, "covers "+ident+" twice")
		}
		seen[canon] = true
		var val string
		if strings.HasPrefix(name, "@") {
			val, err = derived(name, c.Params, r, readURL)
		} else {
			val, err = fieldValue(name, c.Params, r.Header, dicts)
		}
		if err != nil {
			return nil, "", err
		}
		if !baseValue(val) {
			return nil, "", malformed(inH, "covers "+ident+", whose value is not printable ASCII")
		}
		if name == k.idHeader && len(c.Params.Names()) == 0 {
			if id, err = single(r.Header, http.CanonicalHeaderKey(k.idHeader)); err != nil {
				return nil, "", err
			}
		}
		b.WriteString(ident)
		b.WriteString(": ")
		b.WriteString(val)
		b.WriteByte('\n')
		if b.Len() > maxBase {
			return nil, "", malformed(inH, fmt.Sprintf("covers components whose signature base is over %d bytes", maxBase))
		}
	}
	params, err := httpsfv.Marshal(input)
	if err != nil {
		return nil, "", malformed(inH, "does not serialize")
	}
	b.WriteString(`"@signature-params": `)
	b.WriteString(params)
	return b.Bytes(), id, nil
}

// canonicalIdentifier identifies a component whatever the order of its
// parameters: "foo";a;b and "foo";b;a are the same component.
func canonicalIdentifier(name string, p *httpsfv.Params) string {
	names := slices.Sorted(slices.Values(p.Names()))
	var b strings.Builder
	b.WriteString(name)
	for _, n := range names {
		v, _ := p.Get(n)
		fmt.Fprintf(&b, "\x00%s=%T:%v", n, v, v)
	}
	return b.String()
}

// dictionaryFields are the fields known to be structured-field
// dictionaries: sf serializes them strictly.
var dictionaryFields = []string{"content-digest", "repr-digest", "want-content-digest", "want-repr-digest", "signature-input", "signature"}

// fieldValue is the component value of header field name (RFC 9421 § 2.1)
// with its parameters sf, key and bs; req and tr do not apply to a request's
// headers and are refused, as are unknown parameters.
func fieldValue(name string, p *httpsfv.Params, h http.Header, dicts map[string]*httpsfv.Dictionary) (string, error) {
	const inH = "Signature-Input"
	if name != strings.ToLower(name) || !httpguts.ValidHeaderFieldName(name) {
		return "", malformed(inH, "covers a field name that is not a lowercase header name")
	}
	var sf, bs bool
	var key string
	hasKey := false
	for _, pn := range p.Names() {
		v, _ := p.Get(pn)
		switch pn {
		case "sf", "bs":
			if v != true {
				return "", malformed(inH, fmt.Sprintf("%q;%s is not a boolean flag", name, pn))
			}
			sf, bs = sf || pn == "sf", bs || pn == "bs"
		case "key":
			var ok bool
			if key, ok = v.(string); !ok {
				return "", malformed(inH, fmt.Sprintf("%q;key is not a string", name))
			}
			hasKey = true
		default:
			return "", malformed(inH, fmt.Sprintf("covers %q with parameter %s, which is not supported on a request", name, pn))
		}
	}
	if bs && (sf || hasKey) {
		return "", malformed(inH, fmt.Sprintf("%q: bs cannot be combined with sf or key", name))
	}
	vals := h.Values(name)
	if len(vals) == 0 {
		return "", missing(http.CanonicalHeaderKey(name))
	}
	trimmed := make([]string, len(vals))
	for i, v := range vals {
		trimmed[i] = strings.Trim(v, " \t")
	}
	switch {
	case bs:
		l := make(httpsfv.List, len(trimmed))
		for i, v := range trimmed {
			l[i] = httpsfv.NewItem([]byte(v))
		}
		return httpsfv.Marshal(l)
	case hasKey:
		d, ok := dicts[name]
		if !ok {
			var err error
			if d, err = httpsfv.UnmarshalDictionary(trimmed); err != nil {
				return "", malformed(http.CanonicalHeaderKey(name), "is not a structured-field dictionary")
			}
			dicts[name] = d
		}
		m, ok := d.Get(key)
		if !ok {
			return "", malformed(http.CanonicalHeaderKey(name), "has no member "+key)
		}
		// A one-member list serializes as its member's value.
		return httpsfv.Marshal(httpsfv.List{m})
	case sf:
		if !slices.Contains(dictionaryFields, name) {
			return "", malformed(inH, fmt.Sprintf("covers %q;sf, a field whose structured type is not known", name))
		}
		d, err := httpsfv.UnmarshalDictionary(trimmed)
		if err != nil {
			return "", malformed(http.CanonicalHeaderKey(name), "is not a structured-field dictionary")
		}
		return httpsfv.Marshal(d)
	}
	return strings.Join(trimmed, ", "), nil
}

// target is the request URL as the derived components read it.
type target struct {
	scheme, authority, path, query string
	hasQuery                       bool
}

// parseTarget reads the absolute http(s) URL a request was sent to,
// normalized as RFC 9110 § 4.2.3 says: scheme and host lowercase, no
// default port, an empty path as "/". Path and query stay as sent
// (percent-encoding is not decoded).
func parseTarget(raw string) (*target, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Opaque != "" {
		return nil, fmt.Errorf("%w: the request URL is not an absolute http(s) URL: the signature covers it", ErrMalformedHeader)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	t := &target{scheme: u.Scheme, authority: host, path: u.EscapedPath(), query: u.RawQuery, hasQuery: u.RawQuery != "" || u.ForceQuery}
	if port != "" {
		t.authority += ":" + port
	}
	if t.path == "" {
		t.path = "/"
	}
	return t, nil
}

// derived is the value of a derived component (RFC 9421 § 2.2) of request
// r; readURL reads r's URL, for the components that need it.
func derived(name string, p *httpsfv.Params, r Request, readURL func() (*target, error)) (string, error) {
	const inH = "Signature-Input"
	if name != "@query-param" && len(p.Names()) > 0 {
		return "", malformed(inH, fmt.Sprintf("covers %q with a parameter, which is not supported on it", name))
	}
	if name == "@method" {
		if r.Method == "" {
			return http.MethodPost, nil
		}
		return r.Method, nil
	}
	if !slices.Contains([]string{"@target-uri", "@authority", "@scheme", "@request-target", "@path", "@query", "@query-param"}, name) {
		return "", malformed(inH, fmt.Sprintf("covers %q, which is not a derived component of a request", name))
	}
	t, err := readURL()
	if err != nil {
		return "", err
	}
	switch name {
	case "@target-uri":
		return t.scheme + "://" + t.authority + t.pathAndQuery(), nil
	case "@authority":
		return t.authority, nil
	case "@scheme":
		return t.scheme, nil
	case "@request-target":
		return t.pathAndQuery(), nil
	case "@path":
		return t.path, nil
	case "@query":
		return "?" + t.query, nil
	}
	return t.queryParam(p)
}

func (t *target) pathAndQuery() string {
	if t.hasQuery {
		return t.path + "?" + t.query
	}
	return t.path
}

// queryParam is the value of "@query-param";name="..." (RFC 9421 § 2.2.8):
// the query parsed as application/x-www-form-urlencoded, names and values
// re-encoded; the name must occur exactly once.
func (t *target) queryParam(p *httpsfv.Params) (string, error) {
	const inH = "Signature-Input"
	var want string
	for _, pn := range p.Names() {
		v, _ := p.Get(pn)
		s, ok := v.(string)
		if pn != "name" || !ok {
			return "", malformed(inH, `covers "@query-param" with a parameter other than a string name`)
		}
		want = s
	}
	if len(p.Names()) == 0 {
		return "", malformed(inH, `covers "@query-param" without its name`)
	}
	var val string
	found := 0
	for pair := range strings.SplitSeq(t.query, "&") {
		if pair == "" {
			continue
		}
		n, v, _ := strings.Cut(pair, "=")
		if formEncode(formDecode(n)) == want {
			val = formEncode(formDecode(v))
			found++
		}
	}
	switch found {
	case 0:
		return "", malformed(inH, fmt.Sprintf("covers query parameter %q, which the URL does not have", want))
	case 1:
		return val, nil
	}
	return "", malformed(inH, fmt.Sprintf("covers query parameter %q, which the URL has more than once", want))
}

// formDecode decodes s as application/x-www-form-urlencoded does: + is a
// space, and %XX its byte; a % not followed by two hex digits stays.
func formDecode(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// formEncode percent-encodes every byte of s but ASCII letters, digits and
// *-._ (the application/x-www-form-urlencoded percent-encode set; a space
// is %20, as RFC 9421 § 2.2.8 shows).
func formEncode(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("*-._", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// baseValue reports whether v may stand in a signature base: printable
// ASCII, spaces and tabs, no newline.
func baseValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
