package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
)

// boxHMAC is docs/receiving.md's Box example: Box signs the body and the
// timestamp, not BOX-DELIVERY-ID.
var boxHMAC = HMAC{
	IDHeader: "BOX-DELIVERY-ID", TimestampHeader: "BOX-DELIVERY-TIMESTAMP", SignatureHeader: "BOX-SIGNATURE-PRIMARY",
	Encoding: "base64", Content: "{body}{timestamp}",
}

// TestDeliveryKey: what dedupe keys a verified delivery by. A scheme that
// signs no delivery ID is keyed by its body (within its secret's scope)
// or its signature, never by an ID a captured request can change.
func TestDeliveryKey(t *testing.T) {
	signsID := boxHMAC
	signsID.Content = "{id}.{timestamp}.{body}"
	noID := boxHMAC
	noID.IDHeader = ""
	json := []byte(`{"event_id":"Ev1","type":"event_callback"}`)
	form := []byte("command=%2Fdeploy&text=prod&trigger_id=13345224609.738474920.8088930838d88f008e0&user_id=U2147483697")
	for _, tt := range []struct {
		name, scheme string
		hmac         *HMAC
		body         []byte
		want         Key
	}{
		{"github", "github", nil, json, KeyBody},
		{"meta", "meta", nil, json, KeyBody},
		{"standard", "standard", nil, json, KeyID},
		{"hmac, Box: the ID is not signed", "hmac", &boxHMAC, json, KeyBody},
		{"hmac, no id_header", "hmac", &noID, json, KeyBody},
		{"hmac signing {id}", "hmac", &signsID, json, KeyID},
		{"slack event, its event_id signed in the body", "slack", nil, json, KeyID},
		{"slack slash command, a form", "slack", nil, form, KeySignature},
		{"slack interaction, a form of JSON", "slack", nil, []byte("payload=" + url.QueryEscape(`{"type":"block_actions","trigger_id":"1.2.3"}`)), KeySignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := mustNew(t, tt.scheme, []string{testSecret(tt.scheme, 0)}, Options{HMAC: tt.hmac})
			h := v.Sign("delivery-1", t0, tt.body)
			d, err := v.Verify(Request{Header: h, Body: tt.body}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if d.Key != tt.want {
				t.Errorf("Key = %v, want %v", d.Key, tt.want)
			}
			if got := d.SecretFingerprint != ""; got != (tt.want == KeyBody) {
				t.Errorf("SecretFingerprint %q: set %v, want set only when keyed by body", d.SecretFingerprint, got)
			}
			if got := d.SignatureSHA256 != ""; got != (tt.want == KeySignature) {
				t.Errorf("SignatureSHA256 %q: set %v, want set only when keyed by signature", d.SignatureSHA256, got)
			}
			if tt.want == KeySignature {
				sig := strings.TrimPrefix(h.Get("X-Slack-Signature"), "v0=")
				raw, _ := hex.DecodeString(sig)
				if sum := sha256.Sum256(raw); d.SignatureSHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("SignatureSHA256 = %q, want the signature's hash", d.SignatureSHA256)
				}
			}
		})
	}
}

// TestBoxCapturedUnderFreshIDs: the finding. A captured Box request
// verifies under any BOX-DELIVERY-ID (Box does not sign it), so its key
// must not depend on the ID: every copy gets one key.
func TestBoxCapturedUnderFreshIDs(t *testing.T) {
	v := mustNew(t, "hmac", []string{"box-primary-key"}, Options{HMAC: &boxHMAC})
	body := []byte(`{"type":"webhook_event","id":"e1","trigger":"FILE.UPLOADED"}`)
	h := v.Sign("box-delivery-1", t0, body)
	first, err := v.Verify(Request{Header: h, Body: body}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"box-delivery-2", "box-delivery-3"} {
		h.Set("BOX-DELIVERY-ID", id)
		d, err := v.Verify(Request{Header: h, Body: body}, t0)
		if err != nil {
			t.Fatalf("the captured request under %s: %v (it verifies: the ID is not signed)", id, err)
		}
		if d.ID != id || d.Key != KeyBody || d.SecretFingerprint != first.SecretFingerprint {
			t.Errorf("under %s: %+v; want keyed by body, the first's scope", id, d)
		}
	}
}

// TestSecretFingerprint: the scope of a body key is the secret that
// verified, never the secret itself; two endpoints with other secrets
// get other scopes, one secret gets one scope under rotation.
func TestSecretFingerprint(t *testing.T) {
	body := []byte(`{"object":"page","entry":[{"id":"1","time":1700000000}]}`)
	const appA, appB = "meta-app-secret-a", "meta-app-secret-b"
	fingerprint := func(v *Verifier, signer *Verifier) string {
		t.Helper()
		d, err := v.Verify(Request{Header: signer.Sign("", t0, body), Body: body}, t0)
		if err != nil {
			t.Fatal(err)
		}
		return d.SecretFingerprint
	}
	a := mustNew(t, "meta", []string{appA}, Options{})
	b := mustNew(t, "meta", []string{appB}, Options{})
	rotating := mustNew(t, "meta", []string{appA, appB}, Options{})
	fa, fb := fingerprint(a, a), fingerprint(b, b)
	if fa == "" || fa == fb {
		t.Errorf("two apps' fingerprints: %q and %q; want two, different", fa, fb)
	}
	if got := fingerprint(rotating, b); got != fb {
		t.Errorf("app B's secret among two: %q, want B's own %q", got, fb)
	}
	if got := fingerprint(mustNew(t, "meta", []string{appA}, Options{}), a); got != fa {
		t.Errorf("one secret, another verifier: %q, want %q", got, fa)
	}
	if len(fa) != 2*scopeBytes {
		t.Errorf("fingerprint %q: want %d hex digits", fa, 2*scopeBytes)
	}
	for _, enc := range []string{appA, hex.EncodeToString([]byte(appA)), base64.StdEncoding.EncodeToString([]byte(appA))} {
		if strings.Contains(enc, fa) || strings.Contains(fa, enc) {
			t.Errorf("fingerprint %q shows the secret", fa)
		}
	}
	if sum := sha256.Sum256([]byte(appA)); strings.HasPrefix(hex.EncodeToString(sum[:]), fa) {
		t.Errorf("fingerprint %q is the secret's plain hash: one guess per hash", fa)
	}

	// rfc9421 keys a request whose signature covers no ID by the body,
	// within the key's scope.
	r1 := rfcNew(t, []string{testRFCKey1}, []string{"k1"}, Options{})
	r2 := rfcNew(t, []string{testRFCKey2}, []string{"k1"}, Options{})
	var got []string
	for _, v := range []*Verifier{r1, r2} {
		req := rfcSign(t, v, "", t0, body)
		d, err := v.Verify(req, t0)
		if err != nil || d.Key != KeyBody || d.SecretFingerprint == "" {
			t.Fatalf("rfc9421 without an ID: %+v, %v; want keyed by body, scoped", d, err)
		}
		got = append(got, d.SecretFingerprint)
	}
	if got[0] == got[1] {
		t.Errorf("rfc9421: two keys under one keyid share the scope %q", got[0])
	}
	if d, err := r1.Verify(rfcSign(t, r1, "msg_1", t0, body), t0); err != nil || d.Key != KeyID || d.SecretFingerprint != "" {
		t.Errorf("rfc9421 with a covered ID: %+v, %v; want keyed by ID", d, err)
	}
}

// TestDedupeKey: the default key of each key kind, byte for byte the
// placeholders webhook_dedupe resolved before: {webhook.id};
// {webhook.scheme}:{webhook.secret_fingerprint}:{webhook.body_sha256};
// {webhook.scheme}:{webhook.signature_sha256}. A missing part is no key.
func TestDedupeKey(t *testing.T) {
	body := func() string { return "b0d7" }
	for _, tt := range []struct {
		d    Delivery
		want string
	}{
		{Delivery{Scheme: "standard", ID: "msg_1", Key: KeyID}, "msg_1"},
		{Delivery{Scheme: "standard", Key: KeyID}, ""},
		{Delivery{Scheme: "github", ID: "d-1", Key: KeyBody, SecretFingerprint: "f1"}, "github:f1:b0d7"},
		{Delivery{Scheme: "github", Key: KeyBody}, ""},
		{Delivery{Scheme: "twilio", Key: KeySignature, SignatureSHA256: "5e"}, "twilio:5e"},
		{Delivery{Scheme: "twilio", Key: KeySignature}, ""},
	} {
		if got := tt.d.DedupeKey(body); got != tt.want {
			t.Errorf("%+v: DedupeKey = %q, want %q", tt.d, got, tt.want)
		}
	}
}
