package verify

import "errors"

// NewSigner returns the Verifier that signs a destination's deliveries:
// scheme ("" is standard) with its one secret and, for rfc9421, the keyid
// the signature names ("" for the other schemes, which refuse one). A
// public key (whpk_, or a public-key scheme's) only verifies: it is
// refused.
func NewSigner(scheme, secret, keyID string) (*Verifier, error) {
	if scheme == "" {
		scheme = "standard"
	}
	var keyIDs []string
	if keyID != "" {
		keyIDs = []string{keyID}
	}
	opts := Options{KeyIDs: keyIDs}
	if scheme == "sns" { // its key is named by its certificate's URL
		if keyID == "" {
			return nil, errors.New("scheme sns names the certificate of its key: give its SigningCertURL as the key ID")
		}
		opts = Options{SNS: &SNS{signingCertURL: keyID}}
	}
	if scheme == "pubsub" { // its token names the service account
		if keyID == "" {
			return nil, errors.New("scheme pubsub's token names a service account: give its email as the key ID")
		}
		opts = Options{}
	}
	v, err := New(scheme, []string{secret}, opts)
	if err != nil {
		return nil, err
	}
	if v.pubsub != nil {
		v.pubsub.account = keyID
	}
	if _, isKey := v.scheme.(keyScheme); isKey && !v.CanSign() {
		return nil, errors.New("a public key only verifies: sign with the private key, in PKCS#8 PEM")
	}
	if !v.CanSign() {
		return nil, errors.New("a whpk_ public key only verifies: sign with the whsk_ key")
	}
	return v, nil
}
