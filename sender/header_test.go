package sender_test

import (
	"strings"
	"testing"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/verify"
)

// TestCheckHeader refuses the headers a destination may not set, and
// never quotes a value.
func TestCheckHeader(t *testing.T) {
	std, _ := verify.NewSigner("standard", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "")
	stripe, _ := verify.NewSigner("stripe", "whsec_test", "")
	for _, tt := range []struct {
		name, value string
		signer      sender.Signer
		ok          bool
	}{
		{"X-Source", "hookgate", std, true},
		{"Authorization", "Bearer s3cr3t", std, true},
		{"Connection", "close", std, false},
		{"transfer-encoding", "chunked", std, false},
		{"Host", "evil.example", std, false},
		{"Content-Length", "1", std, false},
		{"Webhook-Signature", "v1,x", std, false},
		{"Webhook-Id", "x", std, false},
		{"Webhook-Signature", "v1,x", stripe, true}, // not stripe's
		{"Stripe-Signature", "t=1", stripe, false},
		{"Hookgate-Redrive-Id", "x", std, false},
		{"Bad Name", "x", std, false},
		{"X-Token", "s3cr3t\r\nX-Injected: 1", std, false},
	} {
		err := sender.CheckHeader(tt.name, tt.value, tt.signer, "https://hooks.example.com/in")
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want allowed %v", tt.name, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error quotes the value: %v", tt.name, err)
		}
	}
	for name, secret := range map[string]bool{"Authorization": true, "X-Api-Key": true, "X-Auth-Token": true, "X-Client-Secret": true, "X-Source": false} {
		if sender.SecretHeader(name) != secret {
			t.Errorf("SecretHeader(%s) = %v", name, !secret)
		}
	}
}
