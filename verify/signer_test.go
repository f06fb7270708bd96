package verify

import (
	"strings"
	"testing"
	"time"
)

// TestNewSigner: a destination's signer is its scheme (standard by
// default) over its one secret, and the rfc9421 keyid; a whpk_ public key,
// which only verifies, is refused.
func TestNewSigner(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	body := []byte(`{"a":1}`)
	s, err := NewSigner("", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "")
	if err != nil {
		t.Fatal(err)
	}
	standard, err := New("standard", []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := standard.Verify(Request{Header: s.Sign("msg_1", t0, body), Body: body}, t0); err != nil {
		t.Errorf("its signature does not verify as standard: %v", err)
	}
	if _, err := NewSigner("rfc9421", testRFCKey1, "k1"); err != nil {
		t.Errorf("rfc9421 with a keyid: %v", err)
	}
	if _, err := NewSigner("rfc9421", "whpk_"+rfcEd25519Pub, "k1"); err == nil || !strings.Contains(err.Error(), "only verifies") {
		t.Errorf("a whpk_ key: %v, want it refused", err)
	}
	if _, err := NewSigner("nope", "s", ""); err == nil {
		t.Error("an unknown scheme: no error")
	}
}
