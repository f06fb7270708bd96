package verify

import (
	"net/http"
	"slices"
	"testing"
)

// TestCredentialHeaders: every header a scheme's signer writes is its
// delivery ID, a body digest, or one of its credential headers; and the
// credential headers are what verification needs: without them, a
// genuine request fails.
func TestCredentialHeaders(t *testing.T) {
	body := []byte(`{"id":"evt_1","event_id":"Ev1","type":"reservation.confirmed"}`)
	// Twilio signs a JSON body through the URL's bodySHA256.
	const url = "https://hooks.example.com/in?bodySHA256=401a28ad2728426ada8cc5a711c600cff7e586affa624a04d814484cc61749ac"
	for _, scheme := range Schemes() {
		t.Run(scheme, func(t *testing.T) {
			v := mustNew(t, scheme, []string{testSecret(scheme, 0)}, Options{})
			if ts, ok := v.scheme.(tokenScheme); (ok && ts.body != nil) || v.sns != nil {
				t.Skip("its token or signature is in the body: no header is a credential")
			}
			if _, ok := v.scheme.(mailgunScheme); ok {
				if creds := v.CredentialHeaders(); len(creds) != 0 {
					t.Errorf("mailgun signs inside the body, yet names credential headers %v", creds)
				}
				return
			}
			if v.pubsub != nil {
				t.Skip("verifies with Google's keys, fetched: TestPubSubVector")
			}
			creds := v.CredentialHeaders()
			if len(creds) == 0 {
				t.Fatal("no credential headers")
			}
			for _, name := range creds {
				if name != http.CanonicalHeaderKey(name) {
					t.Errorf("%q is not canonical", name)
				}
			}
			h, err := v.SignRequest(Request{URL: url, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, "msg_1", t0)
			if err != nil {
				t.Fatal(err)
			}
			h.Set("Content-Type", "application/json")
			for name, vals := range h {
				if vals[0] == "msg_1" || name == "Content-Digest" || name == "Content-Type" {
					continue
				}
				if !slices.Contains(creds, name) {
					t.Errorf("the signer writes %s, which is not among the credential headers %v", name, creds)
				}
			}
			d, err := v.Verify(Request{URL: url, Header: h, Body: body}, t0)
			if err != nil {
				t.Fatalf("a genuine request: %v", err)
			}
			if !slices.Equal(d.Credentials, creds) {
				t.Errorf("Delivery.Credentials = %v, want %v", d.Credentials, creds)
			}
			for _, name := range creds {
				h.Del(name)
			}
			if _, err := v.Verify(Request{URL: url, Header: h, Body: body}, t0); err == nil {
				t.Error("verified without its credential headers")
			}
		})
	}
}
