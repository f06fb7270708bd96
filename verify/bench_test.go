package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
)

// BenchmarkVerify1KiB measures one verification of a 1 KiB body, for each
// scheme, with two secrets configured (the rotation case: the first one
// misses). The budget is 5 µs per request.
func BenchmarkVerify1KiB(b *testing.B) {
	body := bytes.Repeat([]byte(`{"k":"v"}`), 1024/9)
	body = append([]byte(`{"id":"evt_1","event_id":"Ev1",`), body...)[:1024]
	for _, scheme := range Schemes() {
		b.Run(scheme, func(b *testing.B) {
			signer := mustNewB(b, scheme, []string{testSecret(scheme, 0)})
			v := mustNewB(b, scheme, []string{testSecret(scheme, 1), testSecret(scheme, 0)})
			if v.SignsURL() {
				b.Skip("signs the URL the request is sent to: see its own benchmark")
			}
			h := signer.Sign("msg_1", t0, body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(Request{Header: h, Body: body}, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHMACOverhead compares one verification with one secret, for
// each HMAC-SHA256 scheme, against the bare cost of what it cannot avoid:
// one HMAC-SHA256 over the same 1 KiB and a constant-time comparison
// (the "bare-hmac" case). The budget is 1.2x the bare cost.
func BenchmarkHMACOverhead(b *testing.B) {
	body := bytes.Repeat([]byte(`{"k":"v"}`), 1024/9)
	body = append([]byte(`{"id":"evt_1","event_id":"Ev1",`), body...)[:1024]
	key := []byte(testSecret("github", 0))
	b.Run("bare-hmac", func(b *testing.B) {
		want := hmacSHA256(key, body)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			m := hmac.New(sha256.New, key)
			m.Write(body)
			if !hmac.Equal(m.Sum(nil), want) {
				b.Fatal("no match")
			}
		}
	})
	for _, scheme := range []string{"standard", "stripe", "github", "shopify", "slack", "hookgate", "zoom", "meta", "twitter"} {
		b.Run(scheme, func(b *testing.B) {
			v := mustNewB(b, scheme, []string{testSecret(scheme, 0)})
			h := v.Sign("msg_1", t0, body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(Request{Header: h, Body: body}, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustNewB(b *testing.B, scheme string, secrets []string) *Verifier {
	var keyIDs []string
	if scheme == "rfc9421" {
		keyIDs = testKeyIDs(len(secrets))
	}
	v, err := New(scheme, secrets, Options{KeyIDs: keyIDs})
	if err != nil {
		b.Fatal(err)
	}
	return v
}
