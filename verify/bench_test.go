package verify

import (
	"bytes"
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
