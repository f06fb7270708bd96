package verify

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v74/github"
	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v85/webhook"
	svix "github.com/svix/svix-webhooks/go"
)

func readVector(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDocumentedVectors checks each scheme against a worked example from the
// provider's own documentation or reference-library tests, verified at the
// example's own time.
func TestDocumentedVectors(t *testing.T) {
	tests := []struct {
		name    string
		scheme  string
		secret  string
		headers map[string]string
		body    []byte
		ts      int64 // the example's time; 0 for schemes without one
		wantID  string
	}{
		{
			// standard-webhooks libraries/go/webhook_test.go and svix go/webhook_test.go, TestWebhookSign.
			name: "standard webhooks spec", scheme: "standard", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
			headers: map[string]string{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330", "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
			body:    []byte(`{"test": 2432232314}`), ts: 1614265330, wantID: "msg_p5jXN8AQM9LWM0D4loKWxJek",
		},
		{
			name: "svix header names, unknown versions around", scheme: "standard", secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
			headers: map[string]string{"svix-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "svix-timestamp": "1614265330", "svix-signature": "v1a,ZmFrZQ== v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v2,xyz"},
			body:    []byte(`{"test": 2432232314}`), ts: 1614265330, wantID: "msg_p5jXN8AQM9LWM0D4loKWxJek",
		},
		{
			// stripe-dotnet src/StripeTests/Services/Events/EventUtilityTest.cs with event_test_signature.json.
			name: "stripe dotnet fixture", scheme: "stripe", secret: "webhook_secret",
			headers: map[string]string{"stripe-signature": "t=1533204620,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef"},
			body:    readVector(t, "stripe_event.json"), ts: 1533204620, wantID: "evt_123",
		},
		{
			// GitHub docs, "Validating webhook deliveries".
			name: "github docs", scheme: "github", secret: "It's a Secret to Everybody",
			headers: map[string]string{"x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
			body:    []byte("Hello, World!"), wantID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		},
		{
			// shopify-app-js packages/apps/shopify-api/lib/webhooks/__tests__/validate.test.ts.
			name: "shopify api js", scheme: "shopify", secret: "test_secret_key",
			headers: map[string]string{"x-shopify-hmac-sha256": "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=", "x-shopify-webhook-id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"},
			body:    []byte(`{"foo": "bar"}`), wantID: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
		},
		{
			// shopify_app (Ruby) test/shopify_app/controller_concerns/webhook_verification_test.rb: old secret still accepted.
			name: "shopify ruby rotation", scheme: "shopify", secret: "secret",
			headers: map[string]string{"x-shopify-hmac-sha256": "XqRcjrSv57VACn6apEO9znyu/wkN1VC7QxdSPwK3Hzs="},
			body:    []byte("foo=anything"),
		},
		{
			// Slack "Verifying requests from Slack", as reproduced by python-slack-sdk's signature tests.
			name: "slack docs", scheme: "slack", secret: "8f742231b10e8888abcd99yyyzzz85a5",
			headers: map[string]string{"x-slack-request-timestamp": "1531420618", "x-slack-signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"},
			body:    readVector(t, "slack_command.txt"), ts: 1531420618,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := []string{tt.secret}
			if tt.name == "shopify ruby rotation" {
				secrets = []string{"secret", "old_secret"}
			}
			v := mustNew(t, tt.scheme, secrets, Options{})
			h := http.Header{}
			for k, val := range tt.headers {
				h.Set(k, val)
			}
			now := time.Unix(tt.ts, 0).Add(30 * time.Second)
			d, err := v.Verify(Request{Header: h, Body: tt.body}, now)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if d.ID != tt.wantID {
				t.Errorf("ID = %q, want %q", d.ID, tt.wantID)
			}
			if tt.ts != 0 && d.Timestamp.Unix() != tt.ts {
				t.Errorf("Timestamp = %d, want %d", d.Timestamp.Unix(), tt.ts)
			}
			// One changed body byte must fail.
			changed := bytes.Clone(tt.body)
			changed[0] ^= 1
			if _, err := v.Verify(Request{Header: h, Body: changed}, now); err == nil {
				t.Error("changed body accepted")
			}
		})
	}
}

// TestReferenceLibraries signs with each provider's own Go library and
// verifies with ours, and the other way round where the library verifies.
func TestReferenceLibraries(t *testing.T) {
	body := []byte(`{"id":"evt_ref","event_id":"EvRef","type":"reservation.confirmed","reservation_id":"r-42"}`)
	now := time.Now() // the libraries read the wall clock; ours is told the same time

	t.Run("standard-webhooks", func(t *testing.T) {
		const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_ref", now, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", "msg_ref")
		h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		h.Set("webhook-signature", sig)
		v := mustNew(t, "standard", []string{secret}, Options{})
		if _, err := v.Verify(Request{Header: h, Body: body}, now); err != nil {
			t.Errorf("ours rejects the library's signature: %v", err)
		}
		if err := wh.Verify(body, v.Sign("msg_ref", now, body)); err != nil {
			t.Errorf("the library rejects ours: %v", err)
		}
	})

	t.Run("svix", func(t *testing.T) {
		const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		wh, err := svix.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_svix", now, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("svix-id", "msg_svix")
		h.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
		h.Set("svix-signature", sig)
		v := mustNew(t, "standard", []string{secret}, Options{})
		if _, err := v.Verify(Request{Header: h, Body: body}, now); err != nil {
			t.Errorf("ours rejects svix's signature: %v", err)
		}
		if err := wh.Verify(body, v.Sign("msg_svix", now, body)); err != nil {
			t.Errorf("svix rejects ours: %v", err)
		}
	})

	t.Run("stripe-go", func(t *testing.T) {
		const secret = "whsec_test_reference"
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: now})
		h := http.Header{}
		h.Set("Stripe-Signature", signed.Header)
		v := mustNew(t, "stripe", []string{secret}, Options{})
		d, err := v.Verify(Request{Header: h, Body: body}, now)
		if err != nil {
			t.Errorf("ours rejects stripe-go's signature: %v", err)
		}
		if d.ID != "evt_ref" {
			t.Errorf("ID = %q, want evt_ref", d.ID)
		}
		if err := webhook.ValidatePayload(body, v.Sign("", now, body).Get("Stripe-Signature"), secret); err != nil {
			t.Errorf("stripe-go rejects ours: %v", err)
		}
	})

	t.Run("go-github", func(t *testing.T) {
		const secret = "github hook secret"
		v := mustNew(t, "github", []string{secret}, Options{})
		sig := v.Sign("d-1", now, body).Get("X-Hub-Signature-256")
		if err := github.ValidateSignature(sig, body, []byte(secret)); err != nil {
			t.Errorf("go-github rejects ours: %v", err)
		}
	})

	t.Run("slack-go", func(t *testing.T) {
		const secret = "8f742231b10e8888abcd99yyyzzz85a5"
		v := mustNew(t, "slack", []string{secret}, Options{})
		h := v.Sign("", now, body)
		sv, err := slack.NewSecretsVerifier(h, secret)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sv.Write(body); err != nil {
			t.Fatal(err)
		}
		if err := sv.Ensure(); err != nil {
			t.Errorf("slack-go rejects ours: %v", err)
		}
		d, err := v.Verify(Request{Header: h, Body: body}, now)
		if err != nil || d.ID != "EvRef" {
			t.Errorf("Verify = %+v, %v; want ID EvRef", d, err)
		}
	})
}

// hmacVector is one of hmacVectors.
type hmacVector struct {
	name, source string
	// provider names the catalogue row that verifies it; "": the
	// generic scheme, configured by cfg
	provider string
	cfg      HMAC
	secret   string
	headers  map[string]string
	body     string
	now      time.Time
	signedAt time.Time // when the provider signed, in its zone; zero: now
	// method and url are the request's, for a content that signs them.
	method, url string
}

// hmacVectors are providers' published vectors of HMAC signatures that
// no named scheme covers: the catalogue's rows (provider), and the
// generic scheme's configurations (cfg).
var hmacVectors = []hmacVector{
	{
		// EasyPost/easypost-node@8.8.0, test/services/webhook.test.js,
		// "validates a webhook secret", with the secret, signature and body
		// of EasyPost/examples' client-library fixtures. The SDKs normalize
		// the secret to NFKD first: "sécret" is given so.
		name:     "easypost",
		source:   "easypost-node webhook.test.js",
		provider: "easypost",
		secret:   "se\u0301cret",
		headers:  map[string]string{"X-Hmac-Signature": "hmac-sha256-hex=38f3f53c103713df81616a0a186d77141957323ec21d5fe9363db93840f527db"},
		body:     "{\"description\":\"tracker.updated\",\"mode\":\"production\",\"previous_attributes\":{\"status\":\"in_transit\"},\"created_at\":\"2024-08-02T19:26:52.000Z\",\"pending_urls\":[\"https://example.com/easypost\"],\"completed_urls\":[],\"updated_at\":\"2024-08-02T19:26:52.000Z\",\"id\":\"evt_1\",\"user_id\":\"user_1\",\"status\":\"pending\",\"object\":\"Event\",\"result\":{\"id\":\"trk_1\",\"object\":\"Tracker\",\"mode\":\"production\",\"tracking_code\":\"1\",\"status\":\"in_transit\",\"status_detail\":\"arrived_at_facility\",\"created_at\":\"2024-07-31T14:45:27Z\",\"updated_at\":\"2024-08-02T19:26:51Z\",\"signed_by\":null,\"weight\":614.4,\"est_delivery_date\":\"2024-08-05T00:00:00Z\",\"shipment_id\":null,\"carrier\":\"FedEx\",\"tracking_details\":[{\"object\":\"TrackingDetail\",\"message\":\"Shipment information sent to FedEx\",\"description\":\"Shipment information sent to FedEx\",\"status\":\"pre_transit\",\"status_detail\":\"label_created\",\"datetime\":\"2024-07-31T15:00:00Z\",\"source\":\"FedEx\",\"carrier_code\":\"OC\",\"tracking_location\":{\"object\":\"TrackingLocation\",\"city\":null,\"state\":null,\"country\":\"US\",\"zip\":\"32837\"}},{\"object\":\"TrackingDetail\",\"message\":\"Picked up\",\"description\":\"Picked up\",\"status\":\"in_transit\",\"status_detail\":\"arrived_at_facility\",\"datetime\":\"2024-07-31T19:27:00Z\",\"source\":\"FedEx\",\"carrier_code\":\"PU\",\"tracking_location\":{\"object\":\"TrackingLocation\",\"city\":\"ORLANDO\",\"state\":\"FL\",\"country\":\"US\",\"zip\":\"32809\"}},{\"object\":\"TrackingDetail\",\"message\":\"Arrived at FedEx location\",\"description\":\"Arrived at FedEx location\",\"status\":\"in_transit\",\"status_detail\":\"arrived_at_facility\",\"datetime\":\"2024-07-31T22:35:00Z\",\"source\":\"FedEx\",\"carrier_code\":\"AR\",\"tracking_location\":{\"object\":\"TrackingLocation\",\"city\":\"ORLANDO\",\"state\":\"FL\",\"country\":\"US\",\"zip\":\"32809\"}},{\"object\":\"TrackingDetail\",\"message\":\"Departed FedEx location\",\"description\":\"Departed FedEx location\",\"status\":\"in_transit\",\"status_detail\":\"departed_facility\",\"datetime\":\"2024-08-01T14:42:13Z\",\"source\":\"FedEx\",\"carrier_code\":\"DP\",\"tracking_location\":{\"object\":\"TrackingLocation\",\"city\":\"ORLANDO\",\"state\":\"FL\",\"country\":\"US\",\"zip\":\"32809\"}},{\"object\":\"TrackingDetail\",\"message\":\"On the way\",\"description\":\"On the way\",\"status\":\"in_transit\",\"status_detail\":\"unknown\",\"datetime\":\"2024-08-02T02:46:19Z\",\"source\":\"FedEx\",\"carrier_code\":\"IT\",\"tracking_location\":{\"object\":\"TrackingLocation\",\"city\":\"KENLY\",\"state\":\"NC\",\"country\":\"US\",\"zip\":\"27542\"}},{\"object\":\"TrackingDetail\",\"message\":\"On the way\",\"description\":\"On the way\",\"status\":\"in_transit\",\"status_detail\":\"unknown\",\"datetime\":\"2024-08-02T18:35:20Z\",\"source\":\"FedEx\",\"carrier_code\":\"IT\",\"tracking_location\":{\"object\":\"TrackingLocation\",\"city\":\"EDISON TWP\",\"state\":\"NJ\",\"country\":\"US\",\"zip\":\"08817\"}},{\"object\":\"TrackingDetail\",\"message\":\"Arrived at FedEx location\",\"description\":\"Arrived at FedEx location\",\"status\":\"in_transit\",\"status_detail\":\"arrived_at_facility\",\"datetime\":\"2024-08-02T18:50:00Z\",\"source\":\"FedEx\",\"carrier_code\":\"AR\",\"tracking_location\":{\"object\":\"TrackingLocation\",\"city\":\"EDISON\",\"state\":\"NJ\",\"country\":\"US\",\"zip\":\"08817\"}}],\"carrier_detail\":{\"object\":\"CarrierDetail\",\"service\":\"FEDEX_GROUND\",\"container_type\":null,\"est_delivery_date_local\":\"2024-08-05\",\"est_delivery_time_local\":null,\"origin_location\":\"ORLANDO FL US\",\"origin_tracking_location\":{\"object\":\"TrackingLocation\",\"city\":\"ORLANDO\",\"state\":\"FL\",\"country\":\"US\",\"zip\":\"32809\"},\"destination_location\":\"BROOKLYN HGTS NY US\",\"destination_tracking_location\":null,\"guaranteed_delivery_date\":null,\"alternate_identifier\":null,\"initial_delivery_attempt\":null},\"finalized\":false,\"is_return\":false,\"public_url\":\"https://track.easypost.com/1\"}}",
		now:      t0,
	},
	{
		// Asana publishes no vector, and its official SDKs do not verify
		// webhooks: computed here with `openssl dgst -sha256 -hmac` under
		// the X-Hook-Secret of Asana's own handshake example (Establish a
		// webhook), over an event shaped as its webhooks guide shows one
		// (an independent HMAC, not ours).
		name:     "asana",
		source:   "computed with openssl: no published vector",
		provider: "asana",
		secret:   "b537207f20cbfa02357cf448134da559e8bd39d61597dcd5631b8012eae53e81",
		headers:  map[string]string{"X-Hook-Signature": "cf3cbed64c75f2c0e2354b7189b9fd94e3d91fcd32ed66417b02695c2e7e35ee"},
		body:     `{"events":[{"user":{"gid":"1123","resource_type":"user"},"created_at":"2018-03-20T20:42:03.227Z","action":"changed","resource":{"gid":"1337","resource_type":"task","resource_subtype":"default_task"},"parent":null,"change":{"field":"assignee","action":"changed"}}]}`,
		now:      t0,
	},
	{
		// Dropbox publishes no vector, and its official SDKs do not
		// verify webhooks: computed here with `openssl dgst -sha256 -hmac
		// dropbox-app-secret` over a notification shaped as Dropbox's
		// webhooks reference shows one (an independent HMAC, not ours).
		name:     "dropbox",
		source:   "computed with openssl: no published vector",
		provider: "dropbox",
		secret:   "dropbox-app-secret",
		headers:  map[string]string{"X-Dropbox-Signature": "caa817a54840f54d629497422c1b2027d1a7a6a2ac53036b671fcec3871f0742"},
		body:     `{"list_folder": {"accounts": ["dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc", "dbid:AAA-y2lt1fDjPmGpwhfjkQ1F7gYDAYmFMgg"]}, "delta": {"users": [12345678, 23456789]}}`,
		now:      t0,
	},
	{
		// nylas/nylas-nodejs@6.10.0, __tests__/webhook-notification-
		// spec.js, verifySignature "should pass if the body matches".
		name:     "nylas",
		source:   "nylas-nodejs webhook-notification-spec.js",
		provider: "nylas",
		secret:   "myClientSecret",
		headers:  map[string]string{"X-Nylas-Signature": "ddc02f921a4835e310f249dc09770c3fea2cb6fe949adc1887d7adc04a581e1c"},
		body:     "test123",
		now:      t0,
	},
	{
		// polarsource/polar-js's test (src/webhooks.test.ts, validateEvent:
		// its secret "TestSecret", default webhook-id and body), the
		// timestamp fixed; accepted by @polar-sh/sdk@0.49.0's validateEvent,
		// which keys the HMAC by the secret's own bytes (no whsec_ decoding).
		name:     "polar",
		source:   "@polar-sh/sdk@0.49.0 validateEvent",
		provider: "polar",
		secret:   "TestSecret",
		headers:  map[string]string{"Webhook-Id": "WEBHOOK_ID", "Webhook-Timestamp": "1700000000", "Webhook-Signature": "v1,LCbQWUSHSTKrERtvnjaFq7tgN/cjBMNmexAuPhsXdfM="},
		body:     "{\"type\": \"unknown\"}",
		now:      time.Unix(1700000001, 0),
		signedAt: time.Unix(1700000000, 0),
	},
	{
		// sanity-io/webhook-toolkit (@sanity/webhook@4.0.4), test/
		// signature.test.ts, isValidSignature "returns true on valid
		// signatures".
		name:     "sanity",
		source:   "@sanity/webhook signature.test.ts",
		provider: "sanity",
		secret:   "test",
		headers:  map[string]string{"Sanity-Webhook-Signature": "t=1633519811129,v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0"},
		body:     `{"_id":"resume"}`,
		now:      time.UnixMilli(1633519812000),
		signedAt: time.UnixMilli(1633519811129),
	},
	{
		// @hubspot/api-client@13.5.0's Signature.getSignature("POST", "v3",
		// ...), on the inputs of its own test (test/unit/signature.spec.ts).
		name:     "hubspot",
		source:   "@hubspot/api-client@13.5.0 Signature.getSignature",
		provider: "hubspot",
		secret:   "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy",
		headers:  map[string]string{"X-HubSpot-Request-Timestamp": "1700000000000", "X-HubSpot-Signature-v3": "rQEKkaNUiu+1qGF//O/pw4BCzstSqO1PyUnGICmf+7o="},
		body:     "{\"example_field\":\"example_value\"}",
		now:      time.UnixMilli(1700000001000),
		signedAt: time.UnixMilli(1700000000000),
		method:   "POST",
		url:      "https://www.example.com/webhook_uri",
	},
	{
		// @workos-inc/node@8.13.0 signed it (computeSignature, its tests'
		// secret "secret" and fixture webhook.json), and its constructEvent
		// verified it: the SDK's tests sign at run time.
		name:     "workos",
		source:   "@workos-inc/node@8.13.0 computeSignature and constructEvent",
		provider: "workos",
		secret:   "secret",
		headers:  map[string]string{"WorkOS-Signature": "t=1700000000000, v1=223f201fc1ba13d007c16c7f8c983f809e970a8dca00619909b7f23f23638bd2"},
		body:     "{\"id\":\"wh_123\",\"data\":{\"id\":\"directory_user_01FAEAJCR3ZBZ30D8BD1924TVG\",\"state\":\"active\",\"idp_id\":\"00u1e8mutl6wlH3lL4x7\",\"object\":\"directory_user\",\"last_name\":\"Lunchford\",\"first_name\":\"Blair\",\"directory_id\":\"directory_01F9M7F68PZP8QXP8G7X5QRHS7\",\"created_at\":\"2021-06-25T19:07:33.155Z\",\"updated_at\":\"2021-06-25T19:07:33.155Z\",\"raw_attributes\":{\"name\":{\"givenName\":\"Blair\",\"familyName\":\"Lunchford\",\"middleName\":\"Elizabeth\",\"honorificPrefix\":\"Ms.\"},\"title\":\"Software Engineer\",\"active\":true,\"groups\":[],\"locale\":\"en-US\",\"schemas\":[\"urn:ietf:params:scim:schemas:core:2.0:User\",\"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User\"],\"addresses\":[{\"region\":\"CA\",\"primary\":true,\"locality\":\"San Francisco\",\"postalCode\":\"94016\"}],\"externalId\":\"00u1e8mutl6wlH3lL4x7\",\"displayName\":\"Blair Lunchford\",\"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User\":{\"manager\":{\"value\":\"2\",\"displayName\":\"Kate Chapman\"},\"division\":\"Engineering\",\"department\":\"Customer Success\"}}},\"event\":\"dsync.user.created\",\"created_at\":\"2021-06-25T19:07:33.155Z\"}",
		now:      time.UnixMilli(1700000001000),
		signedAt: time.UnixMilli(1700000000000),
	},
	{
		// Accepted by webflow-api@3.3.4's webhooks.verifySignature (and a
		// changed body refused): Webflow publishes no fixed vector.
		name:     "webflow",
		source:   "webflow-api@3.3.4 webhooks.verifySignature",
		provider: "webflow",
		secret:   "whsec_test_webflow",
		headers:  map[string]string{"X-Webflow-Timestamp": "1700000000000", "X-Webflow-Signature": "f37cfd7e32bf3203254fd0d7a11322296783409f4ff09e990ad0a9f743bcaabf"},
		body:     "{\"triggerType\":\"form_submission\",\"payload\":{\"name\":\"Contact Us\",\"siteId\":\"65427cf400e02b306eaa049c\",\"data\":{\"First Name\":\"Zaphod\"},\"id\":\"6321ca84df3949bfc6752327\"}}",
		now:      time.UnixMilli(1700000001000),
		signedAt: time.UnixMilli(1700000000000),
	},
	{
		// muxinc/mux-node-sdk@13.0.0, tests/api-resources/webhooks.test.ts,
		// verifySignature "should pass for valid signature".
		name:     "mux",
		source:   "mux-node-sdk webhooks.test.ts",
		provider: "mux",
		secret:   "SuperSecret123",
		headers:  map[string]string{"Mux-Signature": "t=1565125718,v1=854ece4c22acef7c66b57d4e504153bc512595e8e9c772ece2a68150548c19a7"},
		body:     "{\"test\":\"body\"}",
		now:      time.Unix(1565125718, 0),
	},
	{
		// razorpay/razorpay-node@2.9.6, test/utils/razorpay-utils.spec.js,
		// validateWebhookSignature.
		name:     "razorpay",
		source:   "razorpay-node razorpay-utils.spec.js",
		provider: "razorpay",
		secret:   "123456",
		headers:  map[string]string{"X-Razorpay-Signature": "2fe04e22977002e6c7cb553adab8b460cb9e2a4970d5953cb27a8472752e3bbc"},
		body:     "{\"a\":1,\"b\":2,\"c\":{\"d\":3}}",
		now:      t0,
	},
	{
		// gocardless/gocardless-nodejs@8.6.3, src/webhooks.test.ts, "parses
		// a string body with valid signature": its fixture, minified as the
		// test signs it.
		name:     "gocardless",
		source:   "gocardless-nodejs webhooks.test.ts",
		provider: "gocardless",
		secret:   "ED7D658C-D8EB-4941-948B-3973214F2D49",
		headers:  map[string]string{"Webhook-Signature": "2693754819d3e32d7e8fcb13c729631f316c6de8dc1cf634d6527f1c07276e7e"},
		body:     "{\"events\":[{\"id\":\"EV00BD05S5VM2T\",\"created_at\":\"2018-07-05T09:13:51.404Z\",\"resource_type\":\"subscriptions\",\"action\":\"created\",\"links\":{\"subscription\":\"SB0003JJQ2MR06\"},\"details\":{\"origin\":\"api\",\"cause\":\"subscription_created\",\"description\":\"Subscription created via the API.\"},\"metadata\":{}},{\"id\":\"EV00BD05TB8K63\",\"created_at\":\"2018-07-05T09:13:56.893Z\",\"resource_type\":\"mandates\",\"action\":\"created\",\"links\":{\"mandate\":\"MD000AMA19XGEC\"},\"details\":{\"origin\":\"api\",\"cause\":\"mandate_created\",\"description\":\"Mandate created via the API.\"},\"metadata\":{}}]}",
		now:      t0,
	},
	{
		// PagerDuty/go-pagerduty@v1.8.0, webhookv3/webhookv3_test.go,
		// TestVerifySignature, case "valid".
		name:     "pagerduty",
		source:   "go-pagerduty webhookv3_test.go",
		provider: "pagerduty",
		secret:   "lDQHScfUeXUKaQRNF+8XIiDKZ7XX3itBAYzwU0TARw8lJqRnkKl2iB1anSb0Z+IK",
		headers:  map[string]string{"X-PagerDuty-Signature": "v1=0c0b9495b893a39e70d1fea2fe11fbe0a825f88b9f67846f6cc07dd2bc5476cd"},
		body:     "{\"event\":{\"id\":\"01BWDWL3NYY7LUFPZCC28QUCMK\",\"event_type\":\"incident.priority_updated\",\"resource_type\":\"incident\",\"occurred_at\":\"2021-04-26T17:36:27.458Z\",\"agent\":{\"html_url\":\"https://acme.pagerduty.com/users/PLH1HKV\",\"id\":\"PLH1HKV\",\"self\":\"https://api.pagerduty.com/users/PLH1HKV\",\"summary\":\"Tenex Engineer\",\"type\":\"user_reference\"},\"client\":null,\"data\":{\"id\":\"PGR0VU2\",\"type\":\"incident\",\"self\":\"https://api.pagerduty.com/incidents/PGR0VU2\",\"html_url\":\"https://acme.pagerduty.com/incidents/PGR0VU2\",\"number\":2,\"status\":\"triggered\",\"title\":\"A little bump in the road\",\"service\":{\"html_url\":\"https://acme.pagerduty.com/services/PF9KMXH\",\"id\":\"PF9KMXH\",\"self\":\"https://api.pagerduty.com/services/PF9KMXH\",\"summary\":\"API Service\",\"type\":\"service_reference\"},\"assignees\":[{\"html_url\":\"https://acme.pagerduty.com/users/PTUXL6G\",\"id\":\"PTUXL6G\",\"self\":\"https://api.pagerduty.com/users/PTUXL6G\",\"summary\":\"User 123\",\"type\":\"user_reference\"}],\"escalation_policy\":{\"html_url\":\"https://acme.pagerduty.com/escalation_policies/PUS0KTE\",\"id\":\"PUS0KTE\",\"self\":\"https://api.pagerduty.com/escalation_policies/PUS0KTE\",\"summary\":\"Default\",\"type\":\"escalation_policy_reference\"},\"teams\":[{\"html_url\":\"https://acme.pagerduty.com/teams/PFCVPS0\",\"id\":\"PFCVPS0\",\"self\":\"https://api.pagerduty.com/teams/PFCVPS0\",\"summary\":\"Engineering\",\"type\":\"team_reference\"}],\"priority\":{\"html_url\":\"https://acme.pagerduty.com/account/incident_priorities\",\"id\":\"PSO75BM\",\"self\":\"https://api.pagerduty.com/priorities/PSO75BM\",\"summary\":\"P1\",\"type\":\"priority_reference\"},\"urgency\":\"high\",\"conference_bridge\":{\"conference_number\":1000,\"conference_url\":\"https://example.com\"},\"resolve_reason\":null}}}",
		now:      t0,
	},
	{
		// PaddleHQ/paddle-node-sdk, src/__tests__/notifications/
		// webhooks-validator.node.test.ts, case "Valid signature"
		// (accepted by @paddle/paddle-node-sdk@3.10.0's isSignatureValid).
		name:     "paddle",
		source:   "paddle-node-sdk webhooks-validator.node.test.ts",
		provider: "paddle",
		secret:   "VALID_SECRET",
		headers:  map[string]string{"Paddle-Signature": "ts=1698796800;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9"},
		body:     "{\"data\": [\"1\", \"2\"]}",
		now:      time.Unix(1698796801, 0),
		signedAt: time.Unix(1698796800, 0),
	},
	{
		// coinbase/coinbase-commerce-node@1.0.4, test/testWebhook.spec.js,
		// "should successfully verify signature and return event".
		name:     "coinbase-commerce",
		source:   "coinbase-commerce-node testWebhook.spec.js",
		provider: "coinbase-commerce",
		secret:   "30291a20-0bd1-4267-9b0f-e6e7b123c0bf",
		headers:  map[string]string{"X-CC-Webhook-Signature": "8be7742c7d372f08a6a3224edadf18a22b65fa9e28f3f2de97376cdaa092590d"},
		body:     "{\"id\":1,\"scheduled_for\":\"2017-01-31T20:50:02Z\",\"attempt_number\":1,\"event\":{\"id\":\"24934862-d980-46cb-9402-43c81b0cdba6\",\"type\":\"charge:created\",\"api_version\":\"2018-03-22\",\"created_at\":\"2017-01-31T20:49:02Z\",\"data\":{\"code\":\"66BEOV2A\",\"name\":\"The Sovereign Individual\",\"description\":\"Mastering the Transition to the Information Age\",\"hosted_url\":\"https://commerce.coinbase.com/charges/66BEOV2A\",\"created_at\":\"2017-01-31T20:49:02Z\",\"expires_at\":\"2017-01-31T21:04:02Z\",\"timeline\":[{\"time\":\"2017-01-31T20:49:02Z\",\"status\":\"NEW\"}],\"metadata\":{},\"pricing_type\":\"no_price\",\"payments\":[],\"addresses\":{\"bitcoin\":\"0000000000000000000000000000000000\",\"ethereum\":\"0x0000000000000000000000000000000000000000\",\"litecoin\":\"3000000000000000000000000000000000\",\"bitcoincash\":\"bitcoincash:000000000000000000000000000000000000000000\"}}}}",
		now:      t0,
	},
	{
		// Atlassian's documentation of Bitbucket Cloud's secured webhooks
		// ("Manage webhooks", Secure webhooks) gives this vector, the one
		// GitHub's documentation gives for X-Hub-Signature-256; read here
		// as public repositories quote it, the page itself not being
		// reachable from this machine.
		name:     "bitbucket",
		source:   "Atlassian's Bitbucket Cloud webhook docs",
		provider: "bitbucket",
		secret:   "It's a Secret to Everybody",
		headers:  map[string]string{"X-Hub-Signature": "sha256=a4771c39fbe90f317c7824e83ddef3caae9cb3d976c214ace1f2937e133263c9"},
		body:     "Hello World!",
		now:      t0,
	},
	{
		// The fixture of @linear/sdk's own test (packages/sdk/src/_tests/
		// LinearWebhooks.test.ts, secret "SECRET"), its webhookTimestamp
		// pinned; the signature accepted by @linear/sdk@98.0.0's
		// LinearWebhookClient.verify (which has no signing function).
		name:     "linear",
		source:   "@linear/sdk@98.0.0 LinearWebhookClient.verify",
		provider: "linear",
		secret:   "SECRET",
		headers:  map[string]string{"Linear-Delivery": "8f3c9c4e-1b2a-4c5d-9e6f-7a8b9c0d1e2f", "Linear-Signature": "9f9fe461cff5e6619c44f1bbe9f1d540e2af8838b8d727b1875bd858b023fac2"},
		body:     "{\"action\":\"create\",\"data\":{\"id\":\"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9\",\"createdAt\":\"2020-01-23T12:53:18.084Z\",\"updatedAt\":\"2020-01-23T12:53:18.084Z\",\"archivedAt\":null,\"body\":\"Indeed, I think this is definitely an improvement over the previous version.\",\"edited\":false,\"issueId\":\"539068e2-ae88-4d09-bd75-22eb4a59612f\",\"userId\":\"aacdca22-6266-4c0a-ab3c-8fa70a26765c\"},\"type\":\"Comment\",\"url\":\"https://linear.app/issue/LIN-1778/foo-bar#comment-77217de3-fb52-4dad-bb9a-b356beb93de8\",\"createdAt\":\"2020-01-23T12:53:18.084Z\",\"webhookTimestamp\":1579784000000}",
		now:      t0,
	},
	{
		// Segment's Webhooks (Actions) destination, @segment/action-
		// destinations@3.497.0, dist/destinations/webhook/index.js
		// extendRequest with sharedSecret "abc123" and data {cool: true},
		// as its test "supports request signing".
		name:     "segment",
		source:   "@segment/action-destinations@3.497.0 webhook extendRequest",
		provider: "segment",
		secret:   "abc123",
		headers:  map[string]string{"X-Signature": "5099cab379b3be52908387457007040cc934ef86"},
		body:     "{\"cool\":true}",
		now:      t0,
	},
	{
		// twitchdev/twitch-cli@fd7dac6, internal/events/trigger/
		// forward_event.go, getSignatureHeader, run on a channel.follow
		// notification shaped as Twitch's docs show it.
		name:     "twitch",
		source:   "twitch-cli getSignatureHeader",
		provider: "twitch",
		secret:   "s3cRe7s3cRe7",
		headers: map[string]string{
			"Twitch-Eventsub-Message-Id":        "e76c6bd4-55c9-4987-8304-da1588d8988b",
			"Twitch-Eventsub-Message-Timestamp": "2019-11-16T10:11:12.634234626Z",
			"Twitch-Eventsub-Message-Signature": "sha256=797cd9e53eb8126db294466b6a0034bc095ca579382315bf9bf5e4d746012f3b",
		},
		body:     "{\"subscription\":{\"id\":\"f1c2a387-161a-49f9-a165-0f21d7a4e1c4\",\"type\":\"channel.follow\",\"version\":\"2\",\"status\":\"enabled\",\"cost\":0,\"condition\":{\"broadcaster_user_id\":\"12826\",\"moderator_user_id\":\"12826\"},\"transport\":{\"method\":\"webhook\",\"callback\":\"https://example.com/webhooks/callback\"},\"created_at\":\"2019-11-16T10:11:12.634234626Z\"},\"event\":{\"user_id\":\"1337\",\"user_login\":\"awesome_user\",\"user_name\":\"Awesome_User\",\"broadcaster_user_id\":\"12826\",\"broadcaster_user_login\":\"twitch\",\"broadcaster_user_name\":\"Twitch\",\"followed_at\":\"2020-07-15T18:16:11.17106713Z\"}}",
		now:      time.Date(2019, 11, 16, 10, 12, 12, 0, time.UTC),
		signedAt: time.Date(2019, 11, 16, 10, 11, 12, 634234626, time.UTC),
	},
	{
		// box/box-python-sdk, test/box_sdk_gen/test/webhooks.py,
		// testWebhookValidation: the primary key's signature.
		name:     "box",
		source:   "box-python-sdk webhooks.py",
		provider: "box",
		secret:   "SamplePrimaryKey",
		headers: map[string]string{
			"BOX-DELIVERY-ID":        "f96bb54b-ee16-4fc5-aa65-8c2d9e5b546f",
			"BOX-DELIVERY-TIMESTAMP": "2020-01-01T00:00:00-07:00",
			"BOX-SIGNATURE-PRIMARY":  "6TfeAW3A1PASkgboxxA5yqHNKOwFyMWuEXny/FPD5hI=",
		},
		body:     `{"type":"webhook_event","webhook":{"id":"1234567890"},"trigger":"FILE.UPLOADED","source":{"id":"1234567890","type":"file","name":"Test.txt"}}`,
		now:      time.Date(2020, 1, 1, 7, 1, 0, 0, time.UTC),
		signedAt: time.Date(2020, 1, 1, 0, 0, 0, 0, time.FixedZone("", -7*3600)),
	},
	{
		// The same test, the secondary key's signature header.
		name:   "box secondary",
		source: "box-python-sdk webhooks.py",
		cfg: HMAC{IDHeader: "BOX-DELIVERY-ID", TimestampHeader: "BOX-DELIVERY-TIMESTAMP", TimestampFormat: "rfc3339", SignatureHeader: "BOX-SIGNATURE-SECONDARY",
			Algorithm: "sha256", Encoding: "base64", Content: "{body}{timestamp}"},
		secret: "SampleSecondaryKey",
		headers: map[string]string{
			"BOX-DELIVERY-ID":         "f96bb54b-ee16-4fc5-aa65-8c2d9e5b546f",
			"BOX-DELIVERY-TIMESTAMP":  "2020-01-01T00:00:00-07:00",
			"BOX-SIGNATURE-SECONDARY": "v+1CD1Jdo3muIcbpv5lxxgPglOqMfsNHPV899xWYydo=",
		},
		body:     `{"type":"webhook_event","webhook":{"id":"1234567890"},"trigger":"FILE.UPLOADED","source":{"id":"1234567890","type":"file","name":"Test.txt"}}`,
		now:      time.Date(2020, 1, 1, 7, 1, 0, 0, time.UTC),
		signedAt: time.Date(2020, 1, 1, 0, 0, 0, 0, time.FixedZone("", -7*3600)),
	},
	{
		// square/square-python-sdk, tests/integration/
		// test_webhooks_helper.py (the same vector is in Square's other
		// SDKs): the notification URL, then the body.
		name:     "square",
		source:   "square-python-sdk test_webhooks_helper.py",
		provider: "square",
		url:      "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
		secret:   "Ibxx_5AKakO-3qeNVR61Dw",
		headers:  map[string]string{"X-Square-Hmacsha256-Signature": "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="},
		body:     `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`,
		now:      t0,
	},
	{
		name:     "square escaped",
		source:   "square-python-sdk test_webhooks_helper.py",
		provider: "square",
		url:      "https://webhook.site/webhooks",
		secret:   "signature-key",
		headers:  map[string]string{"X-Square-Hmacsha256-Signature": "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U="},
		body:     `{"data":{"type":"webhooks","id":">id<"}}`,
		now:      t0,
	},
	{
		// GitHub's legacy X-Hub-Signature (HMAC-SHA1, hex, "sha1="),
		// which the github scheme does not read: octokit/
		// webhooks-methods.js, README.md, sign({secret: "mysecret",
		// algorithm: "sha1"}, eventPayload), eventPayload {foo: "bar"}
		// as JSON. Also the hex encoding and a prefix.
		name:    "github sha1",
		source:  "octokit/webhooks-methods.js README",
		cfg:     HMAC{SignatureHeader: "X-Hub-Signature", Algorithm: "sha1", Prefix: "sha1="},
		secret:  "mysecret",
		headers: map[string]string{"X-Hub-Signature": "sha1=d03207e4b030cf234e3447bac4d93add4c6643d8"},
		body:    `{"foo":"bar"}`,
		now:     t0,
	},
}

// TestHMACProviderVectors checks hmacVectors both ways (verify the
// published signature; sign and get it back).
func TestHMACProviderVectors(t *testing.T) {
	for _, tt := range hmacVectors {
		t.Run(tt.name, func(t *testing.T) {
			scheme, cfg, opts := "hmac", tt.cfg, Options{HMAC: &tt.cfg, Future: time.Hour}
			if tt.provider != "" {
				p, ok := provider(tt.provider)
				if !ok || p.HMAC == nil {
					t.Fatalf("no catalogue row %q with an HMAC", tt.provider)
				}
				scheme, cfg, opts = tt.provider, *p.HMAC, Options{Future: time.Hour}
			}
			v := mustNew(t, scheme, []string{"another secret", tt.secret}, opts)
			h := http.Header{}
			for k, val := range tt.headers {
				h.Set(k, val)
			}
			req := Request{Method: tt.method, URL: tt.url, Header: h, Body: []byte(tt.body)}
			d, err := v.Verify(req, tt.now)
			if err != nil {
				t.Fatalf("%s's vector (%s): %v", tt.name, tt.source, err)
			}
			if d.ID != tt.headers[cfg.IDHeader] {
				t.Errorf("ID = %q, want %q", d.ID, tt.headers[cfg.IDHeader])
			}
			if _, err := v.Verify(Request{Method: tt.method, URL: tt.url, Header: h, Body: []byte(tt.body + " ")}, tt.now); !errors.Is(err, ErrBadSignature) {
				t.Errorf("another body: err = %v, want ErrBadSignature", err)
			}
			if tt.url != "" {
				if _, err := v.Verify(Request{Method: tt.method, URL: tt.url + "x", Header: h, Body: []byte(tt.body)}, tt.now); !errors.Is(err, ErrBadSignature) {
					t.Errorf("another URL: err = %v, want ErrBadSignature", err)
				}
			}
			// Sign: the provider's very headers, then they verify.
			signer := mustNew(t, scheme, []string{tt.secret}, opts)
			at := tt.signedAt
			if at.IsZero() {
				at = tt.now
			}
			signed, err := signer.SignRequest(Request{Method: tt.method, URL: tt.url, Body: []byte(tt.body)}, tt.headers[cfg.IDHeader], at)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.headers {
				if got := signed.Get(k); got != want {
					t.Errorf("signed %s: %q, want the published %q", k, got, want)
				}
			}
			if _, err := v.Verify(Request{Method: tt.method, URL: tt.url, Header: signed, Body: []byte(tt.body)}, tt.now); err != nil {
				t.Errorf("verifying our own signature: %v", err)
			}
		})
	}
}
