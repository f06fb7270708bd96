package verify

import (
	"errors"
	"net/http"
	"testing"
)

// checkVerify runs Verify and checks it either succeeds or fails with one of
// the documented sentinels; anything else (a panic, a stray error) is a bug.
func checkVerify(t *testing.T, scheme string, h http.Header, body []byte) {
	t.Helper()
	v, err := New(scheme, []string{testSecret(scheme, 0), testSecret(scheme, 1)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(h, body, t0)
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
	f.Add("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag==", []byte(`{"test": 2432232314}`))
	f.Add("", "-1", "v1,", []byte(nil))
	f.Add("msg_1", "01700000000", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte(`{"test": 2432232314}`))
	f.Add("msg_1", "+1700000000", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte(`{}`))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", ts)
		h.Set("Webhook-Signature", sig)
		checkVerify(t, "standard", h, body)
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

// FuzzSignVerify checks that whatever a scheme signs, it verifies, and that
// the same headers over a different body do not.
func FuzzSignVerify(f *testing.F) {
	f.Add(uint8(0), "msg_1", int64(1700000000), []byte(`{"id":"evt"}`))
	f.Add(uint8(4), "", int64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, n uint8, id string, ts int64, body []byte) {
		if id == "" || ts < 0 || ts > 1<<40 {
			return
		}
		scheme := Schemes()[int(n)%len(Schemes())]
		v, err := New(scheme, []string{testSecret(scheme, 0)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := v.Sign(id, unixTime(ts), body)
		// Header values cannot hold every byte; skip ids net/http would refuse.
		if !validHeaderValue(id) {
			return
		}
		if _, err := v.Verify(h, body, unixTime(ts)); err != nil {
			t.Fatalf("%s: own signature rejected: %v", scheme, err)
		}
		if _, err := v.Verify(h, append(body, 'x'), unixTime(ts)); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("%s: extended body: err = %v, want ErrBadSignature", scheme, err)
		}
	})
}

func FuzzHMACHeaders(f *testing.F) {
	f.Add("msg_1", "1700000000", "v1=AAAA", []byte(`{}`))
	f.Add("", "2026-11-30T10:00:00Z", "v1=", []byte(nil))
	f.Add("x", "+1700000000", "sha256=zz", []byte(`x`))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		v, err := New("hmac", []string{"secret one", "secret two"}, Options{HMAC: &HMAC{
			IDHeader: "X-Id", TimestampHeader: "X-Ts", SignatureHeader: "X-Sig",
			Encoding: "base64", Prefix: "v1=", Content: "{id}.{timestamp}.{body}",
		}})
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("X-Id", id)
		h.Set("X-Ts", ts)
		h.Set("X-Sig", sig)
		_, err = v.Verify(h, body, t0)
		switch {
		case err == nil,
			errors.Is(err, ErrMissingHeader),
			errors.Is(err, ErrMalformedHeader),
			errors.Is(err, ErrBadSignature),
			errors.Is(err, ErrTimestampOutOfTolerance):
		default:
			t.Fatalf("Verify returned an undocumented error: %v", err)
		}
	})
}
