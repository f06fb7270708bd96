package verify

import (
	"net/http"
	"slices"
)

// credentialHeaders names, per scheme, the request headers that carry its
// signature and its signed timestamp. They are credentials, and a
// signature checked later fails its own timestamp window: durable ingress
// (webhook_enqueue's keep_headers *) keeps them only when named.
var credentialHeaders = map[string][]string{
	"standard": {"Webhook-Signature", "Webhook-Timestamp", "Svix-Signature", "Svix-Timestamp"},
	"stripe":   {"Stripe-Signature"},
	"github":   {"X-Hub-Signature-256", "X-Hub-Signature"},
	"shopify":  {"X-Shopify-Hmac-Sha256"},
	"slack":    {"X-Slack-Signature", "X-Slack-Request-Timestamp"},
	"hookgate": {"X-Webhook-Signature", "X-Webhook-Timestamp"},
	"zoom":     {zoomSignature, zoomTimestamp},
	"meta":     {metaSignature, "X-Hub-Signature"},
	"twitter":  {twitterSignature},
	"twilio":   {twilioSignatureHeader},
	"rfc9421":  {"Signature", "Signature-Input"},
	"discord":  {discord.sigHeader, discord.tsHeader},
	"sendgrid": {sendgridSignature, sendgridTimestamp},
	"telnyx":   {telnyx.sigHeader, telnyx.tsHeader},
	"gitlab":   {"X-Gitlab-Token"},
	"postmark": {"Authorization"},
	"okta":     {"Authorization"},
	"pubsub":   {"Authorization"},
}

// CredentialHeaders names the headers that carry v's signature and signed
// timestamp, in canonical form: for scheme hmac, its signature_header and
// timestamp_header. The slice is shared: do not modify it.
func (v *Verifier) CredentialHeaders() []string {
	if s, ok := v.scheme.(*hmacScheme); ok {
		return s.credentials
	}
	return credentialHeaders[v.scheme.name()]
}

// hmacCredentials is the credential headers of scheme hmac's cfg.
func hmacCredentials(cfg HMAC) []string {
	names := []string{http.CanonicalHeaderKey(cfg.SignatureHeader)}
	if cfg.TimestampHeader != "" {
		names = append(names, http.CanonicalHeaderKey(cfg.TimestampHeader))
	}
	return slices.Compact(names)
}
