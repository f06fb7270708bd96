package verify

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestRFC9421Bounds: an unsigned request cannot ask for unbounded work.
// At most maxRFCSignatures signatures covering content-digest are tried,
// each of at most maxComponents components and a base of maxBase bytes.
func TestRFC9421Bounds(t *testing.T) {
	body := []byte(`{"a":1}`)
	v := rfcNew(t, []string{testRFCKey1}, []string{"k1"}, Options{})
	good := rfcSign(t, v, "m", t0, body)

	// Decoys with the known keyid, then the genuine signature: tried
	// within the bound, it verifies; past it, it is not reached.
	decoys := func(n int) Request {
		r := good
		r.Header = good.Header.Clone()
		var in, sig []string
		for i := range n {
			in = append(in, fmt.Sprintf(`d%d=("content-digest" "@method");created=%d;keyid="k1"`, i, t0.Unix()))
			sig = append(sig, fmt.Sprintf("d%d=:%s:", i, base64.StdEncoding.EncodeToString(make([]byte, 32))))
		}
		r.Header.Set("Signature-Input", strings.Join(append(in, good.Header.Get("Signature-Input")), ", "))
		r.Header.Set("Signature", strings.Join(append(sig, good.Header.Get("Signature")), ", "))
		return r
	}
	if _, err := v.Verify(decoys(maxRFCSignatures-1), t0); err != nil {
		t.Errorf("the genuine signature after %d decoys: %v", maxRFCSignatures-1, err)
	}
	if _, err := v.Verify(decoys(1000), t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("the genuine signature after 1000 decoys: err = %v, want ErrBadSignature (not tried)", err)
	}

	many := make([]string, maxComponents+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"x-f%d"`, i)
	}
	if _, _, err := v.rfc.signatureBase(good, innerList(t, "("+strings.Join(many, " ")+")")); !errors.Is(err, ErrMalformedHeader) {
		t.Errorf("%d components: err = %v, want ErrMalformedHeader", len(many), err)
	}

	big := good
	big.Header = good.Header.Clone()
	big.Header.Set("X-Big", strings.Repeat("a", maxBase))
	if _, _, err := v.rfc.signatureBase(big, innerList(t, `("x-big")`)); !errors.Is(err, ErrMalformedHeader) {
		t.Errorf("a base over %d bytes: err = %v, want ErrMalformedHeader", maxBase, err)
	}
}

// TestStandardEntryBound: a header of many v1a entries costs at most
// maxEntries Ed25519 verifications, each a hash of the whole body; past
// the bound, entries are skipped.
func TestStandardEntryBound(t *testing.T) {
	seed := base64.StdEncoding.EncodeToString(make([]byte, 32))
	v := mustNew(t, "standard", []string{"whsk_" + seed}, Options{})
	body := []byte(`{"a":1}`)
	genuine := v.Sign("m", t0, body).Get("Webhook-Signature")
	decoy := "v1a," + base64.StdEncoding.EncodeToString(make([]byte, 64))
	with := func(n int) http.Header {
		h := v.Sign("m", t0, body)
		h.Set("Webhook-Signature", strings.TrimSpace(strings.Repeat(decoy+" ", n)+genuine))
		return h
	}
	if _, err := v.Verify(Request{Header: with(maxEntries - 1), Body: body}, t0); err != nil {
		t.Errorf("the genuine entry after %d decoys: %v", maxEntries-1, err)
	}
	if _, err := v.Verify(Request{Header: with(5000), Body: body}, t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("the genuine entry after 5000 decoys: err = %v, want ErrBadSignature (skipped)", err)
	}
}

// TestShortKeysRefused: an empty or short whsec_ key (a shell variable
// that expanded to nothing) would let anyone sign; New refuses it, under
// standard and rfc9421 alike, without echoing it.
func TestShortKeysRefused(t *testing.T) {
	for _, secret := range []string{"whsec_", "whsec_AA==", "whsec_" + base64.StdEncoding.EncodeToString([]byte("fifteen bytes!!"))} {
		if _, err := New("standard", []string{secret}, Options{}); err == nil || !strings.Contains(err.Error(), "at least 16 bytes") {
			t.Errorf("standard %q: err = %v, want a refusal", secret, err)
		}
		if _, err := New("rfc9421", []string{secret}, Options{KeyIDs: []string{"k"}}); err == nil || !strings.Contains(err.Error(), "at least 16 bytes") {
			t.Errorf("rfc9421 %q: err = %v, want a refusal", secret, err)
		}
	}
	if _, err := New("standard", []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))}, Options{}); err != nil {
		t.Errorf("a 16-byte key: %v", err)
	}
}
