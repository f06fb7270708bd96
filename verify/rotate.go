package verify

import (
	"net/http"
	"strings"
)

// Cosign adds to h, the headers v signed a request with, the signature
// previous gave the same request (a rotation's old secret, signed at the
// same time with the same ID), in the scheme's form for several
// signatures: Standard Webhooks' space-separated "v1," entries, Stripe's
// repeated "v1=" fields, a generic hmac's separated, prefixed fields (the
// rows with a separator: Paddle, Mux, Polar, ...). It reports whether it
// did: a scheme with one signature per request (GitHub, Shopify, ...)
// carries the new one only, and h is left as it is.
func (v *Verifier) Cosign(h, previous http.Header) bool {
	name, sep, prefix := v.multiSignature()
	mine, theirs := h.Get(name), previous.Get(name)
	if name == "" || mine == "" || theirs == "" {
		return false
	}
	var extra []string
	for _, f := range strings.Split(theirs, sep) {
		if f = strings.TrimSpace(f); strings.HasPrefix(f, prefix) {
			extra = append(extra, f)
		}
	}
	if len(extra) == 0 {
		return false
	}
	h.Set(name, mine+sep+strings.Join(extra, sep))
	return true
}

// CarriesSeveral reports whether the scheme carries several signatures
// on one request, so that Cosign adds a rotation's old one.
func (v *Verifier) CarriesSeveral() bool {
	name, _, _ := v.multiSignature()
	return name != ""
}

// multiSignature is the header that carries several signatures in v's
// scheme, their separator, and the prefix of a signature's field; ""
// when the scheme carries one.
func (v *Verifier) multiSignature() (header, sep, prefix string) {
	switch s := v.scheme.(type) {
	case standardScheme:
		return "Webhook-Signature", " ", "v1"
	case stripeScheme:
		return "Stripe-Signature", ",", "v1="
	case *hmacScheme:
		if s.cfg.Separator != "" {
			return s.cfg.SignatureHeader, s.cfg.Separator, strings.TrimSpace(s.cfg.Prefix)
		}
	}
	return "", "", ""
}
