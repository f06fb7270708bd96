package verify

import (
	"bytes"
	"net/http"
	"testing"
)

// BenchmarkVerify1KiB measures one verification of a 1 KiB body, for each
// scheme, with two secrets configured (the rotation case: the first one
// misses). The budget is 5 µs per request.
func BenchmarkVerify1KiB(b *testing.B) {
	head := `{"id":"evt_1","event_id":"Ev1","pad":"`
	body := []byte(head + string(bytes.Repeat([]byte("x"), 1024-len(head)-2)) + `"}`) // 1 KiB of JSON
	for _, scheme := range Schemes() {
		b.Run(scheme, func(b *testing.B) {
			switch scheme {
			case "sns", "pubsub":
				b.Skip("verifies with keys it fetches: see its own tests")
			}
			signer := mustNewB(b, scheme, []string{testSecret(scheme, 0)})
			v := mustNewB(b, scheme, []string{testSecret(scheme, 1), testSecret(scheme, 0)})
			if v.SignsURL() {
				b.Skip("signs the URL the request is sent to: see its own benchmark")
			}
			if ts, ok := v.scheme.(tokenScheme); ok && ts.body != nil {
				b.Skip("its token is in the body: see its own tests")
			}
			h, body := signer.Sign("msg_1", t0, body), body
			if _, ok := v.scheme.(mailgunScheme); ok {
				var err error
				if h, body, err = signer.SignMessage(Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, "msg_1", t0); err != nil {
					b.Fatal(err)
				}
			}
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
	var h *HMAC
	if scheme == "hmac" {
		h = &testHMAC
	}
	v, err := New(scheme, secrets, Options{KeyIDs: keyIDs, HMAC: h})
	if err != nil {
		b.Fatal(err)
	}
	return v
}
