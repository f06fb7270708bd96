package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/google/go-cmp/cmp"
)

// The keys of RFC 9421 Appendix B.1: the shared secret of B.1.5 (the
// base64 of 64 bytes, as hookgate's whsec_ keys are), and the Ed25519 key
// of B.1.4 (the JWK's d, the seed, and x, the public key).
const (
	rfcSharedSecret = "uzvJfB4u3N0Jy4T7NZ75MDVcr8zSTInedJtkgcu46YW4XByzNJjxBdtjUkdJPBtbmHhIDi6pcl8jsasjlTMtDQ=="
	rfcEd25519Seed  = "n4Ni+HpISpVObnQMW0wOhCKROaIKqKtW/2ZYb2p9KcU="
	rfcEd25519Pub   = "JrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs="
)

// rfcCreated is the created parameter of the Appendix B examples.
var rfcCreated = time.Unix(1618884473, 0)

// rfcTestRequest is the test-request of RFC 9421 Appendix B.2; its
// Content-Digest is the body's sha-512.
func rfcTestRequest() Request {
	h := http.Header{}
	h.Set("Host", "example.com")
	h.Set("Date", "Tue, 20 Apr 2021 02:07:55 GMT")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Digest", "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:")
	h.Set("Content-Length", "18")
	return Request{Method: "POST", URL: "https://example.com/foo?param=Value&Pet=dog", Header: h, Body: []byte(`{"hello": "world"}`)}
}

// rfcVerifier holds the Appendix B keys under their keyids.
func rfcVerifier(t testing.TB, ed25519Key string) *Verifier {
	t.Helper()
	v, err := New("rfc9421", []string{"whsec_" + rfcSharedSecret, ed25519Key}, Options{KeyIDs: []string{"test-shared-secret", "test-key-ed25519"}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// innerList parses a Signature-Input member's value.
func innerList(t testing.TB, s string) httpsfv.InnerList {
	t.Helper()
	d, err := httpsfv.UnmarshalDictionary([]string{"x=" + s})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := d.Get("x")
	return m.(httpsfv.InnerList)
}

// TestRFC9421AppendixB checks B.2.5 (hmac-sha256) and B.2.6 (ed25519) both
// ways, byte for byte: the signature base, the verification of the RFC's
// signature, and the signature and header fields hookgate writes with the
// same covered components and parameters.
func TestRFC9421AppendixB(t *testing.T) {
	tests := []struct {
		name, label, input, signature, base string
		keyID                               string
	}{
		{
			name: "B.2.5 hmac-sha256", label: "sig-b25", keyID: "test-shared-secret",
			input:     `("date" "@authority" "content-type");created=1618884473;keyid="test-shared-secret"`,
			signature: `:pxcQw6G3AjtMBQjwo8XzkZf/bws5LelbaMk5rGIGtE8=:`,
			base: `"date": Tue, 20 Apr 2021 02:07:55 GMT
"@authority": example.com
"content-type": application/json
"@signature-params": ("date" "@authority" "content-type");created=1618884473;keyid="test-shared-secret"`,
		},
		{
			name: "B.2.6 ed25519", label: "sig-b26", keyID: "test-key-ed25519",
			input:     `("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`,
			signature: `:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:`,
			base: `"date": Tue, 20 Apr 2021 02:07:55 GMT
"@method": POST
"@path": /foo
"@authority": example.com
"content-type": application/json
"content-length": 18
"@signature-params": ("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`,
		},
	}
	signer := rfcVerifier(t, "whsk_"+rfcEd25519Seed)
	verifiers := map[string]*Verifier{"whsk_ seed": signer, "whpk_ public key": rfcVerifier(t, "whpk_"+rfcEd25519Pub)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rfcTestRequest()
			il := innerList(t, tt.input)
			base, id, err := signer.rfc.signatureBase(r, il)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.base, string(base)); diff != "" {
				t.Errorf("signature base (-RFC +got):\n%s", diff)
			}
			if id != "" {
				t.Errorf("ID = %q, want none: Idempotency-Key is not covered", id)
			}

			// Sign: the RFC's header fields, byte for byte.
			h, err := signer.rfc.signWith(r, tt.label, tt.keyID, il)
			if err != nil {
				t.Fatal(err)
			}
			want := http.Header{"Signature-Input": {tt.label + "=" + tt.input}, "Signature": {tt.label + "=" + tt.signature}}
			if diff := cmp.Diff(want, h); diff != "" {
				t.Errorf("signed header fields (-RFC +got):\n%s", diff)
			}

			// Verify: the RFC's signature passes, at its time.
			r.Header.Set("Signature-Input", tt.label+"="+tt.input)
			r.Header.Set("Signature", tt.label+"="+tt.signature)
			for name, v := range verifiers {
				sigs, err := parseSignatures(r.Header)
				if err != nil {
					t.Fatal(err)
				}
				d, known, err := v.verifySignature(sigs[0], r, rfcCreated)
				if err != nil || !known {
					t.Fatalf("%s: the RFC's signature: known %v, err %v", name, known, err)
				}
				if !d.Timestamp.Equal(rfcCreated) {
					t.Errorf("%s: Timestamp = %v, want %v", name, d.Timestamp, rfcCreated)
				}
				// It does not cover content-digest, which webhook_verify requires.
				if _, err := v.Verify(r, rfcCreated); !errors.Is(err, ErrMalformedHeader) || !strings.Contains(err.Error(), "content-digest") {
					t.Errorf("%s: Verify = %v, want ErrMalformedHeader: no signature covers content-digest", name, err)
				}
			}

			// One changed covered byte fails it.
			r.Header.Set("Content-Type", "application/jsoN")
			sigs, _ := parseSignatures(r.Header)
			if _, _, err := signer.verifySignature(sigs[0], r, rfcCreated); !errors.Is(err, ErrBadSignature) {
				t.Errorf("changed content-type: err = %v, want ErrBadSignature", err)
			}
		})
	}
}

// TestRFC9421TestRequestDigest checks the B.2 request's Content-Digest
// (sha-512) against its body, and the same request signed over
// content-digest with the RFC's keys through Verify.
func TestRFC9421TestRequestDigest(t *testing.T) {
	r := rfcTestRequest()
	if err := checkContentDigest(r.Header, r.Body); err != nil {
		t.Fatalf("B.2 Content-Digest: %v", err)
	}
	if err := checkContentDigest(r.Header, []byte(`{"hello": "World"}`)); !errors.Is(err, ErrBadSignature) {
		t.Errorf("changed body: err = %v, want ErrBadSignature", err)
	}
	v := rfcVerifier(t, "whsk_"+rfcEd25519Seed)
	for _, keyID := range []string{"test-shared-secret", "test-key-ed25519"} {
		il := innerList(t, `("@method" "@authority" "@path" "content-digest" "content-length" "content-type");created=1618884473;keyid="`+keyID+`"`)
		h, err := v.rfc.signWith(r, "sig1", keyID, il)
		if err != nil {
			t.Fatal(err)
		}
		signed := r
		signed.Header = r.Header.Clone()
		for k, vs := range h {
			signed.Header[k] = vs
		}
		d, err := v.Verify(signed, rfcCreated.Add(time.Minute))
		if err != nil {
			t.Fatalf("%s: %v", keyID, err)
		}
		if d.ID != "" || !d.Timestamp.Equal(rfcCreated) {
			t.Errorf("%s: delivery %+v, want no ID, created %v", keyID, d, rfcCreated)
		}
		signed.Body = []byte(`{"hello": "world!"}`)
		if _, err := v.Verify(signed, rfcCreated); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: changed body: err = %v, want ErrBadSignature", keyID, err)
		}
	}
}

const (
	testRFCKey1 = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testRFCKey2 = "whsec_c2Vjb25kIHNlY3JldCBmb3Igcm90YXRpb24="
	testRFCURL  = "https://hooks.example.com/in?tenant=a%20b"
)

// testKeyIDs names n secrets of scheme rfc9421: k1, k2...
func testKeyIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "k" + strconv.Itoa(i+1)
	}
	return out
}

func rfcNew(t testing.TB, secrets []string, keyIDs []string, o Options) *Verifier {
	t.Helper()
	o.KeyIDs = keyIDs
	v, err := New("rfc9421", secrets, o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// rfcSign signs a JSON POST to testRFCURL and returns the request as sent.
func rfcSign(t testing.TB, v *Verifier, id string, ts time.Time, body []byte) Request {
	t.Helper()
	r := Request{Method: "POST", URL: testRFCURL, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	h, err := v.SignRequest(r, id, ts)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		r.Header[k] = vs
	}
	return r
}

func TestRFC9421SignVerify(t *testing.T) {
	body := []byte(`{"id":"evt_1","amount":100}`)
	seed := "whsk_" + rfcEd25519Seed
	tests := []struct {
		name             string
		signer, verifier []string // secrets, each named k1, k2...
	}{
		{"hmac", []string{testRFCKey1}, []string{testRFCKey1}},
		{"ed25519 seed to public key", []string{seed}, []string{"whpk_" + rfcEd25519Pub}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := rfcNew(t, tt.signer, testKeyIDs(len(tt.signer)), Options{})
			v := rfcNew(t, tt.verifier, testKeyIDs(len(tt.verifier)), Options{})
			if !s.SignsURL() || !s.CanSign() {
				t.Fatalf("SignsURL %v, CanSign %v; want both", s.SignsURL(), s.CanSign())
			}
			r := rfcSign(t, s, "msg_1", t0, body)
			wantAlg := map[string]string{"hmac": "hmac-sha256"}[tt.name]
			if wantAlg == "" {
				wantAlg = "ed25519"
			}
			wantInput := `sig1=("@method" "@target-uri" "content-type" "content-digest" "idempotency-key");created=1700000000;keyid="k1";alg="` + wantAlg + `"`
			if got := r.Header.Get("Signature-Input"); got != wantInput {
				t.Errorf("Signature-Input = %s, want %s", got, wantInput)
			}
			sum := sha256.Sum256(body)
			if got, want := r.Header.Get("Content-Digest"), "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":"; got != want {
				t.Errorf("Content-Digest = %s, want %s", got, want)
			}
			d, err := v.Verify(r, t0)
			if err != nil {
				t.Fatal(err)
			}
			if d.ID != "msg_1" || !d.Timestamp.Equal(t0) {
				t.Errorf("delivery %+v, want ID msg_1 at %v", d, t0)
			}
			// Without an ID, the id header is not covered: no ID.
			d, err = v.Verify(rfcSign(t, s, "", t0, body), t0)
			if err != nil || d.ID != "" {
				t.Errorf("unsigned ID: delivery %+v, err %v; want no ID", d, err)
			}
		})
	}
	t.Run("public key only verifies", func(t *testing.T) {
		v := rfcNew(t, []string{"whpk_" + rfcEd25519Pub}, []string{"k1"}, Options{})
		if v.CanSign() {
			t.Error("CanSign with a whpk_ key only")
		}
		if _, err := v.SignRequest(Request{URL: testRFCURL}, "m", t0); err == nil {
			t.Error("SignRequest with a whpk_ key only: no error")
		}
	})
	t.Run("no URL", func(t *testing.T) {
		s := rfcNew(t, []string{testRFCKey1}, []string{"k1"}, Options{})
		if _, err := s.SignRequest(Request{Body: body}, "m", t0); err == nil {
			t.Error("SignRequest without a URL: no error")
		}
		if h := s.Sign("m", t0, body); h != nil {
			t.Errorf("Sign without a URL = %v, want nil", h)
		}
	})
	t.Run("custom id header", func(t *testing.T) {
		s := rfcNew(t, []string{testRFCKey1}, []string{"k1"}, Options{IDHeader: "X-Delivery-Id"})
		r := rfcSign(t, s, "msg_9", t0, body)
		if got := r.Header.Get("X-Delivery-Id"); got != "msg_9" {
			t.Fatalf("X-Delivery-Id = %q", got)
		}
		if d, err := s.Verify(r, t0); err != nil || d.ID != "msg_9" {
			t.Errorf("delivery %+v, err %v; want ID msg_9", d, err)
		}
		// A verifier reading Idempotency-Key finds it uncovered: no ID.
		v := rfcNew(t, []string{testRFCKey1}, []string{"k1"}, Options{})
		if d, err := v.Verify(r, t0); err != nil || d.ID != "" {
			t.Errorf("other id header: delivery %+v, err %v; want no ID", d, err)
		}
	})
}

func TestRFC9421Rotation(t *testing.T) {
	body := []byte(`{"a":1}`)
	old := rfcNew(t, []string{testRFCKey1}, []string{"2025"}, Options{})
	next := rfcNew(t, []string{testRFCKey2}, []string{"2026"}, Options{})
	both := rfcNew(t, []string{testRFCKey2, testRFCKey1}, []string{"2026", "2025"}, Options{})
	for name, s := range map[string]*Verifier{"old": old, "next": next} {
		if _, err := both.Verify(rfcSign(t, s, "m", t0, body), t0); err != nil {
			t.Errorf("signed with the %s key: %v", name, err)
		}
	}
	if _, err := next.Verify(rfcSign(t, old, "m", t0, body), t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("old keyid against next only: err = %v, want ErrBadSignature", err)
	}
	// The same keyid with another key: the signature does not match.
	impostor := rfcNew(t, []string{testRFCKey2}, []string{"2025"}, Options{})
	if _, err := old.Verify(rfcSign(t, impostor, "m", t0, body), t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("known keyid, other key: err = %v, want ErrBadSignature", err)
	}
}

// rfcSignWith signs r with v's key k1 over input, the components and
// parameters as given, and returns the signed request.
func rfcSignWith(t *testing.T, v *Verifier, r Request, input string) Request {
	t.Helper()
	h, err := v.rfc.signWith(r, "sig1", "k1", innerList(t, input))
	if err != nil {
		t.Fatal(err)
	}
	r.Header = r.Header.Clone()
	for k, vs := range h {
		r.Header[k] = vs
	}
	return r
}

func TestRFC9421Rejections(t *testing.T) {
	body := []byte(`{"id":"evt_1","amount":100}`)
	v := rfcNew(t, []string{testRFCKey1}, []string{"k1"}, Options{})
	ed := rfcNew(t, []string{"whsk_" + rfcEd25519Seed}, []string{"k1"}, Options{})
	genuine := rfcSign(t, v, "msg_1", t0, body)
	if _, err := v.Verify(genuine, t0); err != nil {
		t.Fatal(err)
	}
	with := func(f func(r *Request)) Request {
		r := genuine
		r.Header = genuine.Header.Clone()
		f(&r)
		return r
	}
	set := func(name, value string) Request {
		return with(func(r *Request) { r.Header.Set(name, value) })
	}
	params := func(p string) string {
		return `("@method" "@target-uri" "content-digest")` + p
	}
	tests := []struct {
		name string
		r    Request
		now  time.Time
		want error
	}{
		{"changed body", with(func(r *Request) { r.Body = []byte(`{"id":"evt_1","amount":101}`) }), t0, ErrBadSignature},
		{"changed body and digest", with(func(r *Request) {
			r.Body = []byte(`{"id":"evt_1","amount":101}`)
			sum := sha256.Sum256(r.Body)
			r.Header.Set("Content-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":")
		}), t0, ErrBadSignature},
		{"changed covered content-type", set("Content-Type", "text/plain"), t0, ErrBadSignature},
		{"changed covered id", set("Idempotency-Key", "msg_2"), t0, ErrBadSignature},
		{"changed URL path", with(func(r *Request) { r.URL = "https://hooks.example.com/other?tenant=a%20b" }), t0, ErrBadSignature},
		{"changed URL query", with(func(r *Request) { r.URL = "https://hooks.example.com/in?tenant=a+b" }), t0, ErrBadSignature},
		{"changed method", with(func(r *Request) { r.Method = "PUT" }), t0, ErrBadSignature},
		{"changed signature byte", set("Signature", flipMiddle(genuine.Header.Get("Signature"))), t0, ErrBadSignature},
		{"changed created", set("Signature-Input", strings.Replace(genuine.Header.Get("Signature-Input"), "created=1700000000", "created=1700000001", 1)), t0, ErrBadSignature},
		{"6 minutes old", genuine, t0.Add(6 * time.Minute), ErrTimestampOutOfTolerance},
		{"6 minutes ahead", genuine, t0.Add(-6 * time.Minute), ErrTimestampOutOfTolerance},
		{"expired", rfcSignWith(t, v, genuine, params(`;created=1700000000;expires=1700000060;keyid="k1"`)), t0.Add(time.Minute), ErrTimestampOutOfTolerance},
		{"unknown keyid", rfcSign(t, rfcNew(t, []string{testRFCKey1}, []string{"k9"}, Options{}), "m", t0, body), t0, ErrBadSignature},
		{"alg not the key's", rfcSignWith(t, v, genuine, params(`;created=1700000000;keyid="k1";alg="ed25519"`)), t0, ErrBadSignature},
		{"unknown alg", rfcSignWith(t, v, genuine, params(`;created=1700000000;keyid="k1";alg="rsa-pss-sha512"`)), t0, ErrBadSignature},
		{"ed25519 signature, hmac key", rfcSign(t, ed, "m", t0, body), t0, ErrBadSignature},
		{"no created", rfcSignWith(t, v, genuine, params(`;keyid="k1"`)), t0, ErrMalformedHeader},
		{"created not an integer", rfcSignWith(t, v, genuine, params(`;created="1700000000";keyid="k1"`)), t0, ErrMalformedHeader},
		{"no keyid", rfcSignWith(t, v, genuine, params(`;created=1700000000`)), t0, ErrMalformedHeader},
		{"content-digest not covered", rfcSignWith(t, v, genuine, `("@method" "@target-uri" "idempotency-key");created=1700000000;keyid="k1"`), t0, ErrMalformedHeader},
		{"content-digest covered only by a member", rfcSignWith(t, v, genuine, `("@target-uri" "content-digest";key="sha-256");created=1700000000;keyid="k1"`), t0, ErrMalformedHeader},
		{"no Signature", with(func(r *Request) { r.Header.Del("Signature") }), t0, ErrMissingHeader},
		{"no Signature-Input", with(func(r *Request) { r.Header.Del("Signature-Input") }), t0, ErrMissingHeader},
		{"no Content-Digest", with(func(r *Request) { r.Header.Del("Content-Digest") }), t0, ErrMissingHeader},
		{"Content-Digest sha-1 only", with(func(r *Request) {
			r.Header.Set("Content-Digest", "sha=:AAAA:")
			*r = rfcSignWith(t, v, *r, params(`;created=1700000000;keyid="k1"`))
		}), t0, ErrMalformedHeader},
		{"Content-Digest changed", set("Content-Digest", "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"), t0, ErrBadSignature},
		{"Content-Digest not a dictionary", with(func(r *Request) {
			r.Header.Set("Content-Digest", "sha-256=:%%:")
			*r = rfcSignWith(t, v, *r, params(`;created=1700000000;keyid="k1"`))
		}), t0, ErrMalformedHeader},
		{"Content-Digest sha-256 not bytes", with(func(r *Request) {
			r.Header.Set("Content-Digest", `sha-256="abc"`)
			*r = rfcSignWith(t, v, *r, params(`;created=1700000000;keyid="k1"`))
		}), t0, ErrMalformedHeader},
		{"Signature-Input not a dictionary", set("Signature-Input", "sig1=(\"@method\""), t0, ErrMalformedHeader},
		{"label only in Signature-Input", set("Signature", strings.Replace(genuine.Header.Get("Signature"), "sig1=", "sig2=", 1)), t0, ErrMalformedHeader},
		{"label only in Signature", set("Signature", genuine.Header.Get("Signature")+", sig2=:AAAA:"), t0, ErrMalformedHeader},
		{"signature not bytes", set("Signature", `sig1="abc"`), t0, ErrMalformedHeader},
		{"input not an inner list", set("Signature-Input", `sig1="@method"`), t0, ErrMalformedHeader},
		{"id header twice", with(func(r *Request) { r.Header.Add("Idempotency-Key", "msg_1") }), t0, ErrMalformedHeader},
		{"URL not absolute", with(func(r *Request) { r.URL = "/in" }), t0, ErrMalformedHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Verify(tt.r, tt.now)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestRFC9421SeveralSignatures: a signature for another verifier (an
// unknown keyid, or not covering content-digest) does not stop the one
// that passes; when none passes, the error is that of the first signature
// with a known keyid.
func TestRFC9421SeveralSignatures(t *testing.T) {
	body := []byte(`{"a":1}`)
	v := rfcNew(t, []string{testRFCKey1}, []string{"k1"}, Options{})
	other := rfcNew(t, []string{testRFCKey2}, []string{"other"}, Options{})
	mine := rfcSign(t, v, "m", t0, body)
	theirs := rfcSign(t, other, "m", t0, body)
	combine := func(first, second Request, firstLabel string) Request {
		r := second
		r.Header = second.Header.Clone()
		in := strings.Replace(first.Header.Get("Signature-Input"), "sig1=", firstLabel+"=", 1)
		sig := strings.Replace(first.Header.Get("Signature"), "sig1=", firstLabel+"=", 1)
		r.Header.Set("Signature-Input", in+", "+second.Header.Get("Signature-Input"))
		r.Header["Signature"] = []string{sig, second.Header.Get("Signature")} // two field lines
		return r
	}
	if _, err := v.Verify(combine(theirs, mine, "theirs"), t0); err != nil {
		t.Errorf("another verifier's signature first: %v", err)
	}
	if _, err := v.Verify(combine(mine, theirs, "mine"), t0); err != nil {
		t.Errorf("another verifier's signature second: %v", err)
	}
	noDigest := rfcSignWith(t, v, mine, `("@method" "@target-uri");created=1700000000;keyid="k1"`)
	if _, err := v.Verify(combine(noDigest, mine, "nodigest"), t0); err != nil {
		t.Errorf("a signature not covering content-digest first: %v", err)
	}
	// Mine is stale, theirs unknown: the stale one is the answer.
	stale := rfcSign(t, v, "m", t0.Add(-time.Hour), body)
	if _, err := v.Verify(combine(theirs, stale, "theirs"), t0); !errors.Is(err, ErrTimestampOutOfTolerance) {
		t.Errorf("unknown keyid then stale: err = %v, want ErrTimestampOutOfTolerance", err)
	}
}

// TestRFC9421Components checks the component values of RFC 9421 § 2's
// examples, and the refusal of what this implementation cannot rebuild.
func TestRFC9421Components(t *testing.T) {
	v := rfcNew(t, []string{testRFCKey1}, []string{"k1"}, Options{})
	h := http.Header{}
	h.Set("Host", "www.example.com")
	h.Add("Cache-Control", "max-age=60")
	h.Add("Cache-Control", "   must-revalidate")
	h.Set("X-Ows-Header", "   Leading and trailing whitespace.   ")
	h.Set("Example-Dict", " a=1,    b=2;x=1;y=2,   c=(a   b   c), d")
	h.Add("Example-Header", "value, with, lots")
	h.Add("Example-Header", "of, commas")
	h.Set("Content-Digest", "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:,  md5=:AAAA:")
	h.Set("X-Empty-Header", "")
	r := Request{Method: "GET", URL: "HTTPS://WWW.Example.com:443/parameters?var=this%20is%20a%20big%0Amultiline%20value&bar=with+plus+whitespace&fa%C3%A7ade%22%3A%20=something&qux=&dup=1&dup=2", Header: h}
	tests := []struct{ component, want string }{
		{`"@method"`, "GET"},
		{`"@target-uri"`, "https://www.example.com/parameters?var=this%20is%20a%20big%0Amultiline%20value&bar=with+plus+whitespace&fa%C3%A7ade%22%3A%20=something&qux=&dup=1&dup=2"},
		{`"@authority"`, "www.example.com"},
		{`"@scheme"`, "https"},
		{`"@path"`, "/parameters"},
		{`"@query"`, "?var=this%20is%20a%20big%0Amultiline%20value&bar=with+plus+whitespace&fa%C3%A7ade%22%3A%20=something&qux=&dup=1&dup=2"},
		{`"@query-param";name="var"`, "this%20is%20a%20big%0Amultiline%20value"},
		{`"@query-param";name="bar"`, "with%20plus%20whitespace"},
		{`"@query-param";name="fa%C3%A7ade%22%3A%20"`, "something"},
		{`"@query-param";name="qux"`, ""},
		{`"cache-control"`, "max-age=60, must-revalidate"},
		{`"x-ows-header"`, "Leading and trailing whitespace."},
		{`"x-empty-header"`, ""},
		{`"example-dict"`, "a=1,    b=2;x=1;y=2,   c=(a   b   c), d"},
		{`"example-dict";key="a"`, "1"},
		{`"example-dict";key="d"`, "?1"},
		{`"example-dict";key="b"`, "2;x=1;y=2"},
		{`"example-dict";key="c"`, "(a b c)"},
		{`"example-header";bs`, ":dmFsdWUsIHdpdGgsIGxvdHM=:, :b2YsIGNvbW1hcw==:"},
		{`"content-digest";sf`, "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:, md5=:AAAA:"},
	}
	for _, tt := range tests {
		t.Run(tt.component, func(t *testing.T) {
			base, _, err := v.rfc.signatureBase(r, innerList(t, "("+tt.component+")"))
			if err != nil {
				t.Fatal(err)
			}
			line, _, _ := strings.Cut(string(base), "\n")
			if want := tt.component + ": " + tt.want; line != want {
				t.Errorf("base line = %q, want %q", line, want)
			}
		})
	}
	refused := []struct{ components, why string }{
		{`"@status"`, "a response's"},
		{`"@signature-params"`, "never covered"},
		{`"@unknown"`, "unknown"},
		{`"@method";req`, "req on a request"},
		{`"@path";x`, "parameter on a derived component"},
		{`"@query-param"`, "no name"},
		{`"@query-param";name="dup"`, "repeated parameter"},
		{`"@query-param";name="nope"`, "absent parameter"},
		{`"@query-param";name=1`, "name not a string"},
		{`"cache-control";tr`, "trailer"},
		{`"cache-control";req`, "req on a request"},
		{`"cache-control";foo`, "unknown parameter"},
		{`"cache-control";sf`, "type not known"},
		{`"example-dict";key="z"`, "absent member"},
		{`"example-dict";key=1`, "key not a string"},
		{`"example-header";bs;sf`, "bs with sf"},
		{`"example-header";bs;key="a"`, "bs with key"},
		{`"example-header";bs=?0`, "bs not true"},
		{`"Cache-Control"`, "uppercase name"},
		{`"cache control"`, "not a field name"},
		{`"cache-control" "cache-control"`, "twice"},
		{`"example-dict";key="a";sf "example-dict";sf;key="a"`, "twice, parameters reordered"},
		{`"x-ows-header";key="a"`, "not a dictionary"},
		{`1`, "not a string"},
	}
	for _, tt := range refused {
		t.Run("refused/"+tt.why, func(t *testing.T) {
			if _, _, err := v.rfc.signatureBase(r, innerList(t, "("+tt.components+")")); !errors.Is(err, ErrMalformedHeader) {
				t.Errorf("%s: err = %v, want ErrMalformedHeader", tt.components, err)
			}
		})
	}
	if _, _, err := v.rfc.signatureBase(r, innerList(t, `("x-absent")`)); !errors.Is(err, ErrMissingHeader) {
		t.Errorf("absent field: err = %v, want ErrMissingHeader", err)
	}
	for raw, want := range map[string]string{
		"http://Example.com":            "http://example.com/",
		"http://example.com:80/a?":      "http://example.com/a?",
		"https://example.com:8443/%7Ea": "https://example.com:8443/%7Ea",
		"http://[::1]:8080/x?y=1#frag":  "http://[::1]:8080/x?y=1",
	} {
		base, _, err := v.rfc.signatureBase(Request{URL: raw}, innerList(t, `("@target-uri")`))
		if line, _, _ := strings.Cut(string(base), "\n"); err != nil || line != `"@target-uri": `+want {
			t.Errorf("%s: base line %q, err %v; want %s", raw, line, err, want)
		}
	}
}

func TestRFC9421New(t *testing.T) {
	tests := []struct {
		name    string
		scheme  string
		secrets []string
		opts    Options
	}{
		{"keyids under another scheme", "standard", []string{testRFCKey1}, Options{KeyIDs: []string{"k1"}}},
		{"no keyids", "rfc9421", []string{testRFCKey1}, Options{}},
		{"fewer keyids than secrets", "rfc9421", []string{testRFCKey1, testRFCKey2}, Options{KeyIDs: []string{"k1"}}},
		{"duplicate keyid", "rfc9421", []string{testRFCKey1, testRFCKey2}, Options{KeyIDs: []string{"k1", "k1"}}},
		{"empty keyid", "rfc9421", []string{testRFCKey1}, Options{KeyIDs: []string{""}}},
		{"keyid not printable", "rfc9421", []string{testRFCKey1}, Options{KeyIDs: []string{"k\n1"}}},
		{"key not base64", "rfc9421", []string{"not base64!"}, Options{KeyIDs: []string{"k1"}}},
		{"short whpk_", "rfc9421", []string{"whpk_AAAA"}, Options{KeyIDs: []string{"k1"}}},
		{"empty secret", "rfc9421", []string{""}, Options{KeyIDs: []string{"k1"}}},
		{"bad id header", "rfc9421", []string{testRFCKey1}, Options{KeyIDs: []string{"k1"}, IDHeader: "Idempotency Key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.scheme, tt.secrets, tt.opts)
			if err == nil {
				t.Fatal("New: no error")
			}
			for _, s := range tt.secrets {
				if s != "" && strings.Contains(err.Error(), s) {
					t.Errorf("error %q holds the secret", err)
				}
			}
		})
	}
}

// BenchmarkRFC9421Verify1KiB measures one verification of a 1 KiB body
// signed with hmac-sha256 over the components SignRequest covers, two keys
// configured.
func BenchmarkRFC9421Verify1KiB(b *testing.B) {
	body := bytes.Repeat([]byte(`{"k":"v"}`), 1024/9)
	v := rfcNew(b, []string{testRFCKey2, testRFCKey1}, []string{"k2", "k1"}, Options{})
	r := rfcSign(b, rfcNew(b, []string{testRFCKey1}, []string{"k1"}, Options{}), "msg_1", t0, body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(r, t0); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzRFC9421 feeds Verify arbitrary Signature-Input, Signature,
// Content-Digest and Idempotency-Key values and bodies, against the RFC's
// keys and an HMAC key k1: it returns a documented error or a delivery, and
// a delivery only when a signature covering content-digest passed and the
// body matches Content-Digest.
func FuzzRFC9421(f *testing.F) {
	v, err := New("rfc9421", []string{testRFCKey1, "whsec_" + rfcSharedSecret, "whpk_" + rfcEd25519Pub},
		Options{KeyIDs: []string{"k1", "test-shared-secret", "test-key-ed25519"}})
	if err != nil {
		f.Fatal(err)
	}
	body := []byte(`{"id":"evt_1"}`)
	genuine := rfcSign(f, v, "msg_1", t0, body)
	f.Add(genuine.Header.Get("Signature-Input"), genuine.Header.Get("Signature"), genuine.Header.Get("Content-Digest"), "msg_1", body)
	b26 := rfcTestRequest()
	f.Add(`sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`,
		`sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:`,
		b26.Header.Get("Content-Digest"), "", b26.Body)
	f.Add(`a=("content-digest" "@query-param";name="tenant" "idempotency-key";bs "content-digest";key="sha-256");created=1700000000;expires=1;keyid="k1";alg="hmac-sha256", b=()`,
		`a=:AAAA:, b=:AAAA:`, `sha-512=:AAAA:, sha-256=?1`, "x", []byte(nil))
	f.Add(`sig1=("content-digest" "@status" "@signature-params");created=-1;keyid="test-shared-secret"`, `sig1=:=:`, `sha-256=:%:`, "", []byte("x"))
	f.Add(`sig1="x", sig2=("content-digest";sf "@request-target" "@query" "@scheme" "@target-uri");created=1700000000;keyid="k1"`, `sig2=:AAAA:;x, sig1=1`, "", "a, b", []byte("{}"))
	f.Fuzz(func(t *testing.T, input, sig, digest, id string, body []byte) {
		h := http.Header{}
		for name, val := range map[string]string{"Signature-Input": input, "Signature": sig, "Content-Digest": digest, "Idempotency-Key": id} {
			if val != "" {
				h.Set(name, val)
			}
		}
		h.Set("Content-Type", "application/json")
		r := Request{Method: "POST", URL: testRFCURL, Header: h, Body: body}
		d, err := v.Verify(r, t0)
		checkErr(t, err)
		if err != nil {
			return
		}
		if err := checkContentDigest(h, body); err != nil {
			t.Fatalf("accepted with Content-Digest %q not matching the body: %v", digest, err)
		}
		if !strings.Contains(input, `"content-digest"`) {
			t.Fatalf("accepted without content-digest covered: %q", input)
		}
		if d.ID != "" && d.ID != id {
			t.Fatalf("ID %q is not the Idempotency-Key %q", d.ID, id)
		}
	})
}

// FuzzRFC9421Base builds signature bases from arbitrary covered components
// over a request with arbitrary URL and headers: an error is a documented
// one; a base has one line per component and the @signature-params line,
// in printable ASCII.
func FuzzRFC9421Base(f *testing.F) {
	f.Add(`("@method" "@target-uri" "@authority" "@scheme" "@request-target" "@path" "@query");created=1`, "https://Example.com:443/a%2Fb?x=1&y", "x-a", "1")
	f.Add(`("@query-param";name="fa%C3%A7ade%22%3A%20" "@query-param";name="bar")`, "http://h/p?bar=with+plus&fa%C3%A7ade%22%3A%20=s", "", "")
	f.Add(`("x-a";key="b" "x-a";sf "x-a";bs "x-a";tr "x-a";req)`, "http://[::1]/", "x-a", "b=(1 2);p, c=?0")
	f.Add(`("content-digest";sf "signature-input";key="sig1")`, "", "content-digest", "sha-256=:AAAA:,x=%\"a\"")
	v := rfcNew(f, []string{testRFCKey1}, []string{"k1"}, Options{})
	f.Fuzz(func(t *testing.T, input, rawURL, field, value string) {
		d, err := httpsfv.UnmarshalDictionary([]string{"s=" + input})
		if err != nil {
			return
		}
		m, _ := d.Get("s")
		il, ok := m.(httpsfv.InnerList)
		if !ok {
			return
		}
		h := http.Header{}
		if field != "" {
			h[http.CanonicalHeaderKey(field)] = []string{value}
		}
		base, _, err := v.rfc.signatureBase(Request{URL: rawURL, Header: h}, il)
		checkErr(t, err)
		if err != nil {
			return
		}
		if lines := strings.Count(string(base), "\n"); lines != len(il.Items) {
			t.Fatalf("%d newlines for %d components:\n%s", lines, len(il.Items), base)
		}
		if !baseValue(strings.ReplaceAll(string(base), "\n", " ")) {
			t.Fatalf("base is not printable ASCII: %q", base)
		}
	})
}
