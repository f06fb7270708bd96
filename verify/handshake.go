package verify

import (
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookgate/hookgate/internal/problem"
)

// Answer is the gateway's own answer to a provider's endpoint handshake.
type Answer struct {
	// Status is the HTTP status of an answer that completes the
	// handshake; a refusal's is its Reason's.
	Status int
	// Header holds the answer's headers, Content-Type among them.
	Header http.Header
	// Body is the answer's body; for a refusal (Reason set), the
	// problem's detail.
	Body []byte
	// Reason is the problem+json reason of a refusal; the zero Reason for
	// an answer that completes the handshake.
	Reason problem.Reason
}

// crcTokenMax is the longest CRC token twitter's handshake answers.
const crcTokenMax = 128

// handshakeSchemes are the schemes with a handshake of their own
// (handshake's switch); the CloudEvents one is any scheme's, when origins
// are configured. New reads them to know whether a Verifier takes part in
// any handshake at all.
var handshakeSchemes = []string{"meta", "twitter", "slack", "zoom", "twitch", "discord", "okta", "msgraph", "nylas", "dropbox", "asana", "sns"}

// handshake is Handshake, for a Verifier that takes part in one.
func (v *Verifier) handshake(r Request, now time.Time) (a Answer, ok bool) {
	switch r.Method {
	case http.MethodOptions:
		return v.cloudEvents(r)
	case http.MethodGet:
		q := query(r.URL)
		switch v.scheme.name() {
		case "meta":
			if q.Get("hub.mode") == "subscribe" {
				return v.metaSubscribe(q), true
			}
		case "twitter":
			if q.Has("crc_token") {
				return v.twitterCRC(q.Get("crc_token")), true
			}
		case "nylas", "dropbox":
			// A webhook's creation: GET ?challenge=<c>, answered with c
			// (Dropbox asks for text/plain and nosniff, which text sets).
			// Unsigned, so held to a token's characters.
			if c := q.Get("challenge"); c != "" && len(c) <= crcTokenMax && crcAlphabet(c) {
				return text(c), true
			}
		case "okta":
			// The event hook's one-time verification: the challenge, as
			// JSON. Unsigned, so held to a token's characters.
			if c := r.Header.Get("X-Okta-Verification-Challenge"); c != "" && len(c) <= crcTokenMax && crcAlphabet(c) {
				body, _ := json.Marshal(map[string]string{"verification": c})
				return Answer{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, true
			}
		}
	case http.MethodPost, "":
		switch v.scheme.name() {
		case "asana":
			// A webhook's creation: X-Hook-Secret, to be echoed, and
			// trusted on first use (learned.go).
			if _, ok := r.Header[hookSecretHeader]; ok {
				return v.hookSecret(r), true
			}
		case "sns":
			// A listed topic's SubscriptionConfirmation, signed as any
			// message, confirmed by a GET of its SubscribeURL when
			// confirm_subscriptions is on; else passed on, verified.
			if !v.sns.cfg.ConfirmSubscriptions || r.Header.Get("X-Amz-Sns-Message-Type") != "SubscriptionConfirmation" {
				break
			}
			_, m, err := v.sns.verify(r, now, v.past, v.future)
			if err == nil {
				err = v.sns.confirm(r.Context, m)
			}
			if err != nil {
				reason, err := Rejection(err)
				return refuse(reason, err.Error()), true
			}
			return text("subscription to " + m.TopicArn + " confirmed"), true
		case "msgraph":
			// A subscription's validation: the token, echoed as plain
			// text. Unsigned (Graph's is readable text), so held to
			// printable ASCII and a bound.
			if t := query(r.URL).Get("validationToken"); t != "" && len(t) <= graphTokenMax && printable(t) {
				return text(t), true
			}
		case "slack":
			if !bytes.Contains(r.Body, []byte("url_verification")) {
				break // the common case: no second verification
			}
			if _, ok := v.verifies(r, now); ok && gjson.GetBytes(r.Body, "type").String() == "url_verification" {
				return text(gjson.GetBytes(r.Body, "challenge").String()), true
			}
		case "discord":
			// The interactions endpoint's PING (type 1), signed as any
			// interaction, is answered with a PONG; Discord also sends
			// mis-signed ones, which must be refused.
			if gjson.GetBytes(r.Body, "type").Int() != 1 {
				break
			}
			if _, err := v.Verify(r, now); err == nil {
				return Answer{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"type":1}`)}, true
			}
		case "twitch":
			// EventSub's callback verification: signed as any message,
			// answered with its challenge, as plain text.
			if r.Header.Get("Twitch-Eventsub-Message-Type") != "webhook_callback_verification" {
				break
			}
			if _, ok := v.verifies(r, now); ok {
				return text(gjson.GetBytes(r.Body, "challenge").String()), true
			}
		case "zoom":
			if !bytes.Contains(r.Body, []byte("endpoint.url_validation")) {
				break
			}
			if key, ok := v.verifies(r, now); ok && gjson.GetBytes(r.Body, "event").String() == "endpoint.url_validation" {
				plain := gjson.GetBytes(r.Body, "payload.plainToken").String()
				body, _ := json.Marshal(map[string]string{
					"plainToken":     plain,
					"encryptedToken": hex.EncodeToString(hmacSHA256(v.keys[key], []byte(plain))), // the key Zoom signed with
				})
				return Answer{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, true
			}
		}
	}
	return Answer{}, false
}

// verifies reports whether r is genuine at now, and which HMAC key signed it.
func (v *Verifier) verifies(r Request, now time.Time) (key int, ok bool) {
	_, key, err := v.verify(r, now)
	return key, err == nil && key >= 0
}

// metaSubscribe answers Meta's subscription handshake: the challenge, when
// the token is the configured one.
func (v *Verifier) metaSubscribe(q url.Values) Answer {
	token := q.Get("hub.verify_token")
	if v.verifyToken == "" || subtle.ConstantTimeCompare([]byte(token), []byte(v.verifyToken)) != 1 {
		return refuse(problem.BadVerifyToken, "hub.verify_token is not this endpoint's verify_token")
	}
	return text(q.Get("hub.challenge"))
}

// twitterCRC answers X's challenge-response check. X signs bodies with the
// same key and construction, so the token is held to a character set that
// no JSON body fits: the gateway must not sign what an attacker chose.
func (v *Verifier) twitterCRC(token string) Answer {
	if token == "" || len(token) > crcTokenMax || !crcAlphabet(token) {
		return refuse(problem.BadCRCToken, "crc_token must be 1 to 128 characters of A-Z, a-z, 0-9, _, = and -")
	}
	body, _ := json.Marshal(map[string]string{"response_token": "sha256=" + base64.StdEncoding.EncodeToString(hmacSHA256(v.keys[0], []byte(token)))})
	return Answer{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
}

// graphTokenMax bounds the Microsoft Graph validation token echoed.
const graphTokenMax = 1024

// printable reports whether s is printable ASCII, spaces included.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func crcAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (c < '0' || c > '9') && c != '_' && c != '=' && c != '-' {
			return false
		}
	}
	return true
}

// cloudEvents answers the CloudEvents HTTP webhook abuse-protection
// handshake (an OPTIONS request naming its origin) when origins are
// configured.
func (v *Verifier) cloudEvents(r Request) (Answer, bool) {
	origin := r.Header.Get("WebHook-Request-Origin")
	if len(v.ceOrigins) == 0 || origin == "" {
		return Answer{}, false
	}
	if !slices.ContainsFunc(v.ceOrigins, func(o string) bool { return strings.EqualFold(o, origin) }) { // host names: any case
		return refuse(problem.OriginNotAllowed, "WebHook-Request-Origin is not among cloudevents_origins"), true
	}
	return Answer{Status: http.StatusOK, Header: http.Header{
		"Allow":                  {http.MethodPost},
		"Webhook-Allowed-Origin": {origin},
		"Webhook-Allowed-Rate":   {v.ceRate},
	}}, true
}

func query(rawURL string) url.Values {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	return u.Query()
}

// text is a 200 answer of a challenge, echoed as plain text the browser
// must not sniff.
func text(s string) Answer {
	return Answer{Status: http.StatusOK, Header: http.Header{
		"Content-Type":            {"text/plain; charset=utf-8"},
		"X-Content-Type-Options":  {"nosniff"},
		"Content-Security-Policy": {"default-src 'none'"}, // an echo is never a page
	}, Body: []byte(s)}
}

func refuse(reason problem.Reason, detail string) Answer {
	return Answer{Status: reason.Status, Reason: reason, Body: []byte(detail)}
}
