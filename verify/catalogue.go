package verify

// The catalogue: every provider webhook_verify and hookgate sign know by
// name, one row each. A provider signs with one of the named schemes
// (stripe, github, ...), or with the generic hmac scheme under a
// configuration of its own, which the row holds: adding such a provider
// is adding a row, with a vector from the provider's own documentation or
// SDK in catalogue_test.go and a section in docs/providers.md.

import "slices"

// Provider is one row of the catalogue.
type Provider struct {
	// Name is what webhook_verify and hookgate sign --scheme take.
	Name string
	// Title is the provider's name, as it writes it.
	Title string
	// Scheme is the named scheme it signs with; "" when HMAC describes
	// its signature.
	Scheme string
	// HMAC is its signature, for a provider without a scheme of its own.
	HMAC *HMAC
	// Docs is the provider's documentation of its signature.
	Docs string
}

// catalogue is every provider, in name order.
var catalogue = []Provider{
	{Name: "asana", Title: "Asana", Docs: "https://developers.asana.com/docs/webhooks-guide",
		HMAC: &HMAC{SignatureHeader: "X-Hook-Signature"}},
	{Name: "bitbucket", Title: "Bitbucket Cloud", Docs: "https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/",
		HMAC: &HMAC{SignatureHeader: "X-Hub-Signature", Prefix: "sha256="}},
	{Name: "box", Title: "Box", Docs: "https://developer.box.com/guides/webhooks/v2/signatures-v2/",
		HMAC: &HMAC{IDHeader: "BOX-DELIVERY-ID", TimestampHeader: "BOX-DELIVERY-TIMESTAMP", TimestampFormat: "rfc3339",
			SignatureHeader: "BOX-SIGNATURE-PRIMARY", Encoding: "base64", Content: "{body}{timestamp}"}},
	{Name: "clerk", Title: "Clerk", Scheme: "standard",
		Docs: "https://clerk.com/docs/webhooks/sync-data"},
	{Name: "coinbase-commerce", Title: "Coinbase Commerce", Docs: "https://docs.cdp.coinbase.com/commerce-onchain/docs/webhooks",
		HMAC: &HMAC{SignatureHeader: "X-CC-Webhook-Signature"}},
	{Name: "discord", Title: "Discord (interactions)", Scheme: "discord",
		Docs: "https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers"},
	{Name: "dropbox", Title: "Dropbox", Docs: "https://www.dropbox.com/developers/reference/webhooks",
		HMAC: &HMAC{SignatureHeader: "X-Dropbox-Signature"}},
	{Name: "easypost", Title: "EasyPost", Docs: "https://docs.easypost.com/guides/webhooks-guide",
		HMAC: &HMAC{SignatureHeader: "X-Hmac-Signature", Prefix: "hmac-sha256-hex="}},
	{Name: "figma", Title: "Figma", Scheme: "figma", Docs: "https://www.figma.com/developers/api#webhooks-v2"},
	{Name: "github", Title: "GitHub", Scheme: "github",
		Docs: "https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries"},
	{Name: "gitlab", Title: "GitLab", Scheme: "gitlab",
		Docs: "https://docs.gitlab.com/user/project/integrations/webhooks/#validate-payloads-by-using-a-secret-token"},
	{Name: "gocardless", Title: "GoCardless", Docs: "https://developer.gocardless.com/getting-started/staying-up-to-date-with-webhooks",
		HMAC: &HMAC{SignatureHeader: "Webhook-Signature"}},
	{Name: "hookgate", Title: "hookgate", Scheme: "hookgate",
		Docs: "https://github.com/hookgate/hookgate/blob/main/docs/receiving.md#schemes"},
	{Name: "hubspot", Title: "HubSpot", Docs: "https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation",
		HMAC: &HMAC{TimestampHeader: "X-HubSpot-Request-Timestamp", TimestampFormat: "unix_ms", SignatureHeader: "X-HubSpot-Signature-v3",
			Encoding: "base64", Content: "{method}{url}{body}{timestamp}"}},
	{Name: "linear", Title: "Linear", Docs: "https://linear.app/developers/webhooks",
		HMAC: &HMAC{IDHeader: "Linear-Delivery", SignatureHeader: "Linear-Signature"}},
	{Name: "mailgun", Title: "Mailgun", Scheme: "mailgun",
		Docs: "https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks"},
	{Name: "meta", Title: "Meta (Facebook, Instagram, WhatsApp)", Scheme: "meta",
		Docs: "https://developers.facebook.com/docs/graph-api/webhooks/getting-started#validate-payloads"},
	{Name: "msgraph", Title: "Microsoft Graph change notifications", Scheme: "msgraph",
		Docs: "https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks"},
	{Name: "mux", Title: "Mux", Docs: "https://www.mux.com/docs/core/verify-webhook-signatures",
		HMAC: &HMAC{SignatureHeader: "Mux-Signature", Separator: ",", TimestampField: "t", Prefix: "v1=", Content: "{timestamp}.{body}"}},
	{Name: "nylas", Title: "Nylas", Docs: "https://developer.nylas.com/docs/v3/notifications/webhooks/",
		HMAC: &HMAC{SignatureHeader: "X-Nylas-Signature"}},
	{Name: "okta", Title: "Okta event hooks", Scheme: "okta",
		Docs: "https://developer.okta.com/docs/concepts/event-hooks/"},
	{Name: "openai", Title: "OpenAI", Scheme: "standard", Docs: "https://platform.openai.com/docs/guides/webhooks"},
	{Name: "paddle", Title: "Paddle Billing", Docs: "https://developer.paddle.com/webhooks/signature-verification",
		HMAC: &HMAC{SignatureHeader: "Paddle-Signature", Separator: ";", TimestampField: "ts", Prefix: "h1=", Content: "{timestamp}:{body}"}},
	{Name: "pagerduty", Title: "PagerDuty", Docs: "https://developer.pagerduty.com/docs/verifying-webhook-signatures",
		HMAC: &HMAC{SignatureHeader: "X-PagerDuty-Signature", Separator: ",", Prefix: "v1="}},
	{Name: "polar", Title: "Polar", Docs: "https://docs.polar.sh/integrate/webhooks/delivery",
		HMAC: &HMAC{IDHeader: "Webhook-Id", TimestampHeader: "Webhook-Timestamp", SignatureHeader: "Webhook-Signature",
			Separator: " ", Prefix: "v1,", Encoding: "base64", Content: "{id}.{timestamp}.{body}"}},
	{Name: "postmark", Title: "Postmark", Scheme: "postmark",
		Docs: "https://postmarkapp.com/developer/webhooks/webhooks-overview"},
	{Name: "pubsub", Title: "Google Cloud Pub/Sub (push)", Scheme: "pubsub",
		Docs: "https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions"},
	{Name: "razorpay", Title: "Razorpay", Docs: "https://razorpay.com/docs/webhooks/validate-test/",
		HMAC: &HMAC{IDHeader: "X-Razorpay-Event-Id", SignatureHeader: "X-Razorpay-Signature"}},
	{Name: "replicate", Title: "Replicate", Scheme: "standard", Docs: "https://replicate.com/docs/topics/webhooks/verify-webhook"},
	{Name: "resend", Title: "Resend", Scheme: "standard",
		Docs: "https://resend.com/docs/webhooks/verify-webhooks-requests"},
	{Name: "sanity", Title: "Sanity", Docs: "https://www.sanity.io/docs/webhooks",
		HMAC: &HMAC{SignatureHeader: "Sanity-Webhook-Signature", Separator: ",", TimestampField: "t", TimestampFormat: "unix_ms",
			Prefix: "v1=", Encoding: "base64url", Content: "{timestamp}.{body}"}},
	{Name: "segment", Title: "Segment", Docs: "https://www.twilio.com/docs/segment/connections/destinations/catalog/actions-webhook",
		HMAC: &HMAC{SignatureHeader: "X-Signature", Algorithm: "sha1"}},
	{Name: "sendgrid", Title: "Twilio SendGrid (Event Webhook)", Scheme: "sendgrid",
		Docs: "https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features"},
	{Name: "shopify", Title: "Shopify", Scheme: "shopify",
		Docs: "https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-2-validate-the-origin-of-your-webhook-to-ensure-its-coming-from-shopify"},
	{Name: "slack", Title: "Slack", Scheme: "slack",
		Docs: "https://api.slack.com/authentication/verifying-requests-from-slack"},
	{Name: "sns", Title: "Amazon SNS", Scheme: "sns",
		Docs: "https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html"},
	{Name: "square", Title: "Square", Docs: "https://developer.squareup.com/docs/webhooks/step3validate",
		HMAC: &HMAC{SignatureHeader: "X-Square-Hmacsha256-Signature", Encoding: "base64", Content: "{url}{body}"}},
	{Name: "standard", Title: "Standard Webhooks (Svix)", Scheme: "standard",
		Docs: "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md"},
	{Name: "stripe", Title: "Stripe", Scheme: "stripe",
		Docs: "https://docs.stripe.com/webhooks#verify-events"},
	{Name: "telnyx", Title: "Telnyx", Scheme: "telnyx",
		Docs: "https://developers.telnyx.com/docs/messaging/messages/receiving-webhooks"},
	{Name: "twilio", Title: "Twilio", Scheme: "twilio",
		Docs: "https://www.twilio.com/docs/usage/webhooks/webhooks-security"},
	{Name: "twitch", Title: "Twitch EventSub", Docs: "https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message",
		HMAC: &HMAC{IDHeader: "Twitch-Eventsub-Message-Id", TimestampHeader: "Twitch-Eventsub-Message-Timestamp", TimestampFormat: "rfc3339",
			SignatureHeader: "Twitch-Eventsub-Message-Signature", Prefix: "sha256=", Content: "{id}{timestamp}{body}"}},
	{Name: "twitter", Title: "X (Account Activity API)", Scheme: "twitter",
		Docs: "https://docs.x.com/x-api/webhooks/introduction"},
	{Name: "webflow", Title: "Webflow", Docs: "https://developers.webflow.com/data/docs/working-with-webhooks",
		HMAC: &HMAC{TimestampHeader: "X-Webflow-Timestamp", TimestampFormat: "unix_ms", SignatureHeader: "X-Webflow-Signature", Content: "{timestamp}:{body}"}},
	{Name: "workos", Title: "WorkOS", Docs: "https://workos.com/docs/webhooks/securing-your-webhook-endpoint/validating-events-are-from-workos",
		HMAC: &HMAC{SignatureHeader: "WorkOS-Signature", Separator: ", ", TimestampField: "t", TimestampFormat: "unix_ms", Prefix: "v1=", Content: "{timestamp}.{body}"}},
	{Name: "zoom", Title: "Zoom", Scheme: "zoom",
		Docs: "https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events"},
}

// provider is the row named name.
func provider(name string) (Provider, bool) {
	i := slices.IndexFunc(catalogue, func(p Provider) bool { return p.Name == name })
	if i < 0 {
		return Provider{}, false
	}
	return catalogue[i], true
}
