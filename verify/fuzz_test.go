package verify

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkVerify runs Verify and checks it either succeeds or fails with one of
// the documented sentinels; anything else (a panic, a stray error) is a bug.
func checkVerify(t *testing.T, scheme string, h http.Header, body []byte) {
	t.Helper()
	v, err := New(scheme, []string{testSecret(scheme, 0), testSecret(scheme, 1)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(Request{Header: h, Body: body}, t0)
	checkErr(t, err)
}

// checkErr fails on an error of Verify that is not one of the documented
// sentinels.
func checkErr(t *testing.T, err error) {
	t.Helper()
	switch {
	case err == nil,
		errors.Is(err, ErrMissingHeader),
		errors.Is(err, ErrMalformedHeader),
		errors.Is(err, ErrBadSignature),
		errors.Is(err, ErrTimestampOutOfTolerance):
	default:
		t.Fatalf("Verify returned an undocumented error: %v", err)
	}
}

func FuzzStandardHeaders(f *testing.F) {
	f.Add("msg_1", "1700000000", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte(`{"test": 2432232314}`))
	f.Add("msg_1", "1700000000", "v1a,abc v1,AAAA v2,x", []byte(`{}`))
	f.Add(v1aMsgID, "1614265330", v1aExpected, []byte(v1aPayload))
	f.Add("", "-1", "v1,", []byte(nil))
	f.Add("msg_1", "01700000000", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte(`{"test": 2432232314}`))
	f.Add("msg_1", "+1700000000", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte(`{}`))
	// An HMAC secret and the v1a vector's public key: v1 entries reach the
	// MAC, v1a entries ed25519.Verify.
	seed, _ := base64.StdEncoding.DecodeString(v1aSeed)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	v, err := New("standard", []string{testSecret("standard", 0), "whpk_" + base64.StdEncoding.EncodeToString(pub)}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", ts)
		h.Set("Webhook-Signature", sig)
		now := t0
		if n, err := strconv.ParseInt(ts, 10, 64); err == nil && n > 0 && n < 1<<40 {
			now = time.Unix(n, 0) // in the window: the signature is checked
		}
		_, err := v.Verify(Request{Header: h, Body: body}, now)
		checkErr(t, err)
	})
}

func FuzzStripeSignature(f *testing.F) {
	f.Add("t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39", []byte(`{"id":"evt_1"}`))
	f.Add("t=,v1=", []byte(nil))
	f.Add("v1=00,t=99999999999999999999", []byte(`{}`))
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := http.Header{}
		h.Set("Stripe-Signature", sig)
		checkVerify(t, "stripe", h, body)
	})
}

func FuzzGitHubSignature(f *testing.F) {
	f.Add("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", []byte("Hello, World!"))
	f.Add("sha256=", []byte(nil))
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := http.Header{}
		h.Set("X-Hub-Signature-256", sig)
		checkVerify(t, "github", h, body)
	})
}

func FuzzShopifySignature(f *testing.F) {
	f.Add("dXNlIGEgcmVhbCBzaWduYXR1cmUgaGVyZQ==", []byte(`{"id":1}`))
	f.Add("=", []byte(nil))
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := http.Header{}
		h.Set("X-Shopify-Hmac-Sha256", sig)
		checkVerify(t, "shopify", h, body)
	})
}

func FuzzSlackSignature(f *testing.F) {
	f.Add("v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503", "1531420618", []byte("token=xyz"))
	f.Add("v0=", "", []byte(`{"event_id":"Ev1"}`))
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		h := http.Header{}
		h.Set("X-Slack-Signature", sig)
		h.Set("X-Slack-Request-Timestamp", ts)
		checkVerify(t, "slack", h, body)
	})
}

func FuzzHookgateHeaders(f *testing.F) {
	f.Add("msg_1", "1700000000", "00ff", []byte(`{}`))
	f.Add("", "", "", []byte(nil))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("X-Webhook-Id", id)
		h.Set("X-Webhook-Timestamp", ts)
		h.Set("X-Webhook-Signature", sig)
		checkVerify(t, "hookgate", h, body)
	})
}

// signers are the signing configurations FuzzSignVerify picks from: every
// named scheme with an HMAC secret, standard with a v1a private key, and
// the generic hmac in several shapes.
var signers = []struct {
	scheme string
	secret string
	hmac   *HMAC
}{
	{scheme: "standard", secret: testSecret("standard", 0)},
	{scheme: "stripe", secret: testSecret("stripe", 0)},
	{scheme: "github", secret: testSecret("github", 0)},
	{scheme: "shopify", secret: testSecret("shopify", 0)},
	{scheme: "slack", secret: testSecret("slack", 0)},
	{scheme: "hookgate", secret: testSecret("hookgate", 0)},
	{scheme: "standard", secret: "whsk_" + v1aSeed},
	{scheme: "hmac", secret: testSecret("hmac", 0), hmac: &testHMAC},
	{scheme: "hmac", secret: "mysecret", hmac: &HMAC{SignatureHeader: "X-Hub-Signature", Algorithm: "sha1", Prefix: "sha1="}},
	{scheme: "hmac", secret: "SamplePrimaryKey", hmac: &HMAC{IDHeader: "Box-Delivery-Id", TimestampHeader: "Box-Delivery-Timestamp",
		TimestampFormat: "rfc3339", SignatureHeader: "Box-Signature-Primary", Encoding: "base64", Content: "{body}{timestamp}"}},
	{scheme: "paddle", secret: "pdl_ntfset_secret"},
	{scheme: "pagerduty", secret: "pagerduty secret"},
	{scheme: "twitch", secret: "s3cRe7s3cRe7"},
	{scheme: "workos", secret: "workos secret"},
	{scheme: "webflow", secret: "webflow secret"},
}

// FuzzSignVerify checks that whatever a signer signs, it verifies (and, for
// v1a, its public key does), and that the same headers over a different
// body do not.
func FuzzSignVerify(f *testing.F) {
	for i := range signers {
		f.Add(uint8(i), "msg_1", int64(1700000000), []byte(`{"id":"evt"}`))
	}
	f.Add(uint8(4), "", int64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, n uint8, id string, ts int64, body []byte) {
		if id == "" || ts < 0 || ts > 1<<40 {
			return
		}
		sc := signers[int(n)%len(signers)]
		signer, err := New(sc.scheme, []string{sc.secret}, Options{HMAC: sc.hmac})
		if err != nil {
			t.Fatal(err)
		}
		verifiers := []*Verifier{signer}
		if strings.HasPrefix(sc.secret, "whsk_") {
			seed, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(sc.secret, "whsk_"))
			pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
			v, err := New(sc.scheme, []string{"whpk_" + base64.StdEncoding.EncodeToString(pub)}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			verifiers = append(verifiers, v)
		}
		h := signer.Sign(id, unixTime(ts), body)
		// Header values cannot hold every byte; skip ids net/http would refuse.
		if !validHeaderValue(id) {
			return
		}
		for _, v := range verifiers {
			if _, err := v.Verify(Request{Header: h, Body: body}, unixTime(ts)); err != nil {
				t.Fatalf("%s: own signature rejected: %v", sc.scheme, err)
			}
			if _, err := v.Verify(Request{Header: h, Body: append(body, 'x')}, unixTime(ts)); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("%s: extended body: err = %v, want ErrBadSignature", sc.scheme, err)
			}
		}
	})
}

// hmacShapes are the generic scheme's configurations FuzzHMACHeaders
// parses with: each algorithm, each encoding, with and without a prefix and
// a timestamp.
var hmacShapes = []HMAC{
	{IDHeader: "X-Id", TimestampHeader: "X-Ts", SignatureHeader: "X-Sig", Encoding: "base64", Prefix: "v1=", Content: "{id}.{timestamp}.{body}"},
	{SignatureHeader: "X-Sig", Algorithm: "sha1", Prefix: "sha1="},
	{IDHeader: "X-Id", SignatureHeader: "X-Sig", Algorithm: "sha512", Content: "{id}{body}"},
	{TimestampHeader: "X-Ts", SignatureHeader: "X-Sig", Encoding: "base64", Content: "{body}{timestamp}"},
	{SignatureHeader: "X-Sig", Separator: ",", Prefix: "v1="},
	{SignatureHeader: "X-Sig", Separator: ";", TimestampField: "ts", Prefix: "h1=", Content: "{timestamp}:{body}"},
	{TimestampHeader: "X-Ts", TimestampFormat: "unix_ms", SignatureHeader: "X-Sig", Content: "{timestamp}:{body}"},
}

func FuzzHMACHeaders(f *testing.F) {
	f.Add(uint8(0), "msg_1", "1700000000", "v1=AAAA", []byte(`{}`))
	f.Add(uint8(3), "", "2026-11-30T10:00:00Z", "AAAA", []byte(nil))
	f.Add(uint8(1), "x", "+1700000000", "sha1=d03207e4b030cf234e3447bac4d93add4c6643d8", []byte(`{"foo":"bar"}`))
	f.Add(uint8(2), "x", "", "zz", []byte(`x`))
	f.Add(uint8(4), "", "", "v1=00,v1=zz, v2=ab,,v1=", []byte(`{}`))
	f.Add(uint8(5), "", "", "ts=1700000000;h1=00;h1=11;h2=x;ts=1", []byte(`{}`))
	f.Add(uint8(6), "", "1700000000000", "00", []byte(`{}`))
	verifiers := make([]*Verifier, len(hmacShapes))
	for i := range hmacShapes {
		v, err := New("hmac", []string{"secret one", "mysecret"}, Options{HMAC: &hmacShapes[i]})
		if err != nil {
			f.Fatal(err)
		}
		verifiers[i] = v
	}
	f.Fuzz(func(t *testing.T, shape uint8, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("X-Id", id)
		h.Set("X-Ts", ts)
		h.Set("X-Sig", sig)
		_, err := verifiers[int(shape)%len(verifiers)].Verify(Request{Header: h, Body: body}, t0)
		checkErr(t, err)
	})
}
