package caddymodule

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookgate/hookgate/caddymodule/cfparse"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/reqbody"
	"github.com/hookgate/hookgate/internal/store"
	"github.com/hookgate/hookgate/internal/telemetry"
	"github.com/hookgate/hookgate/verify"
)

func init() {
	caddy.RegisterModule(Verify{})
	httpcaddyfile.RegisterHandlerDirective("webhook_verify", parseHandler[Verify])
	// Verification sits where authentication sits.
	httpcaddyfile.RegisterDirectiveOrder("webhook_verify", httpcaddyfile.Before, "basic_auth")
}

// DevSecret is the public development secret of the README's quickstart:
// running on it logs a warning.
const DevSecret = "whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA=="

// Verify is the webhook_verify handler: it checks the signature over the
// raw body and the timestamp window, and forwards only genuine requests,
// with the body unchanged. It sets the placeholders {webhook.id},
// {webhook.timestamp}, {webhook.scheme}, {webhook.json.<path>} and
// {webhook.body_sha256}; and {webhook.signature_sha256} or
// {webhook.secret_fingerprint} for a delivery keyed by its signature or its
// body.
type Verify struct {
	// Scheme is the signature format: a provider of verify's catalogue
	// (docs/providers.md: stripe, github, twitch, ...), standard, rfc9421
	// or hmac. Default: standard.
	Scheme string `json:"scheme,omitempty"`

	// Secrets are the signing secrets; a request is genuine when any one
	// matches (rotation). Placeholders {env.*} and {file.*} are replaced
	// when the config loads. Required, but by sns, and by asana, which
	// learns each endpoint's secret from Asana's handshake and keeps it in
	// the hookgate app's store.
	Secrets []string `json:"secrets,omitempty"`

	// Tolerance is how old a signed timestamp may be. Default: 5m.
	Tolerance caddy.Duration `json:"tolerance,omitempty"`

	// FutureTolerance is how far in the future a signed timestamp may be.
	// Default: 5m; for stripe, no limit, as Stripe's libraries do.
	FutureTolerance caddy.Duration `json:"future_tolerance,omitempty"`

	// MaxBody is the largest body accepted, in bytes. Default: 1 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	// HMAC describes the signature of scheme hmac, the generic one for
	// providers the named schemes do not cover. Required by it.
	HMAC *verify.HMAC `json:"hmac,omitempty"`

	// KeyIDs names each secret of scheme rfc9421, in order: a request's
	// keyid selects its key. Required by rfc9421.
	KeyIDs []string `json:"key_ids,omitempty"`

	// IDHeader names the covered header rfc9421 takes the delivery ID
	// from. Default: Idempotency-Key.
	IDHeader string `json:"id_header,omitempty"`

	// URL is the URL twilio and rfc9421 see as the one the provider
	// called, with placeholders; set it behind a proxy that changes the
	// scheme, host or path. Default: the request's own.
	URL string `json:"url,omitempty"`

	// VerifyToken is the token Meta's subscription handshake must carry
	// (scheme meta); {env.*} and {file.*} work.
	VerifyToken string `json:"verify_token,omitempty"`

	// CloudEventsOrigins are the origins whose CloudEvents OPTIONS
	// handshake is answered with their permission.
	CloudEventsOrigins []string `json:"cloudevents_origins,omitempty"`

	// CloudEventsRate is the WebHook-Allowed-Rate answered to an allowed
	// origin. Default: *.
	CloudEventsRate string `json:"cloudevents_rate,omitempty"`

	// SNS configures scheme sns: the topics accepted, the hosts its
	// certificates come from, and whether to confirm subscriptions.
	// Required by it.
	SNS *verify.SNS `json:"sns,omitempty"`

	// PubSub configures scheme pubsub: the audience and the service
	// accounts its tokens must name. Required by it.
	PubSub *verify.PubSub `json:"pubsub,omitempty"`

	verifier *verify.Verifier
	now      func() time.Time
	metrics  *telemetry.Metrics
	logger   *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Verify) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.webhook_verify",
		New: func() caddy.Module { return new(Verify) },
	}
}

// Provision sets up the handler.
func (v *Verify) Provision(ctx caddy.Context) error {
	v.logger = ctx.Logger()
	if v.Scheme == "" {
		v.Scheme = "standard"
	}
	maxBody, err := reqbody.Max(v.MaxBody)
	if err != nil {
		return err
	}
	v.MaxBody = maxBody
	if v.now == nil {
		v.now = time.Now
	}
	repl := caddy.NewReplacer()
	secrets := make([]string, len(v.Secrets)+1)
	for i, s := range append(v.Secrets, v.VerifyToken) {
		what := fmt.Sprintf("secret %d", i+1)
		if i == len(v.Secrets) {
			what = "verify_token"
		}
		if s == "" {
			continue
		}
		val, err := resolveSecret(repl, what, s)
		if err != nil {
			return err
		}
		secrets[i] = val
	}
	if v.HMAC != nil && v.Scheme != "hmac" {
		return fmt.Errorf("an hmac block needs scheme hmac, not %s", v.Scheme)
	}
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	v.metrics = app.metrics
	var learned verify.Learned
	if v.Scheme == "asana" {
		learned = store.Learned{Store: app.useStore(), Scheme: v.Scheme}
	}
	verifier, err := verify.New(v.Scheme, secrets[:len(v.Secrets)], verify.Options{
		Past:   time.Duration(v.Tolerance),
		Future: time.Duration(v.FutureTolerance),
		HMAC:   v.HMAC, KeyIDs: v.KeyIDs, IDHeader: v.IDHeader,
		VerifyToken: secrets[len(v.Secrets)], CloudEventsOrigins: v.CloudEventsOrigins, CloudEventsRate: v.CloudEventsRate,
		SNS: v.SNS, PubSub: v.PubSub, Learned: learned,
	})
	if err != nil {
		return err
	}
	v.verifier = verifier
	if slices.Contains(secrets, DevSecret) {
		v.logger.Warn("webhook_verify runs on the public development secret: anyone can forge requests; set HOOKGATE_SECRET to a secret of your own")
	}
	return nil
}

// ServeHTTP verifies the request and hands it on, or rejects it.
func (v *Verify) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	ctx, span := telemetry.StartSpan(r.Context(), "webhook_verify",
		trace.WithAttributes(attribute.String("hookgate.scheme", v.Scheme)))
	defer span.End()

	r = withContext(r, ctx)
	result, rej, d, r, err := v.check(w, r)
	v.metrics.Verified(span, v.Scheme, result)
	if result == resultHandshake {
		return nil // answered by check, never forwarded
	}
	if err != nil {
		span.SetStatus(codes.Error, result)
		if c := v.logger.Check(zapcore.DebugLevel, "webhook rejected"); c != nil {
			c.Write(zap.String("reason", result), zap.String("detail", err.Error()), zap.String("remote", r.RemoteAddr))
		}
		problem.Write(w, rej, err.Error(), 0)
		return nil
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("webhook.id", d.ID))
	}

	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	repl.Set("webhook.id", d.ID)
	repl.Set("webhook.scheme", v.Scheme)
	ts := ""
	if !d.Timestamp.IsZero() {
		ts = strconv.FormatInt(d.Timestamp.Unix(), 10)
	}
	repl.Set("webhook.timestamp", ts)
	if b, ok := reqbody.Of(r); ok {
		b.Delivery = d // what webhook_dedupe's default key follows, and two placeholders
	}
	return next.ServeHTTP(w, r)
}

// resultHandshake is the metric result of a provider's endpoint handshake,
// which check answers itself.
const resultHandshake = "handshake"

// check reads the body and verifies the request, or answers a provider's
// handshake on w. It returns the metric result (the reason code on
// failure), the rejection, the request carrying its buffered body, and the
// error.
func (v *Verify) check(w http.ResponseWriter, r *http.Request) (result string, rej problem.Reason, d verify.Delivery, _ *http.Request, err error) {
	r, body, err := bufferBody(r, v.MaxBody)
	if err != nil {
		rej = reqbody.Rejection(err)
		return rej.Code, rej, d, r, err
	}
	req := verify.Request{Method: r.Method, Header: r.Header, Body: body, Context: r.Context()}
	if v.Scheme == "asana" {
		// The endpoint its learned secret belongs to: the path as Caddy's
		// path matcher sees it (any case; // and dot segments resolved),
		// so that no other spelling of a route can learn a secret of its
		// own.
		req.Endpoint = caddyhttp.CleanPath(strings.ToLower(arrivedPath(r)), true)
	}
	if v.verifier.SignsURL() || r.Method != http.MethodPost || r.URL.RawQuery != "" {
		// The method and URL as the request arrived, before any rewrite:
		// what the sender signed, and what a handshake reads (a GET's
		// query, or a POST's: Microsoft Graph's validationToken). Looked
		// up only here: most requests are POSTs without a query, under
		// schemes that sign neither.
		req.Method, req.URL = v.arrived(r)
	}
	if a, ok := v.verifier.Handshake(req, v.now()); ok {
		if a.Reason != (problem.Reason{}) {
			return a.Reason.Code, a.Reason, d, r, errors.New(string(a.Body))
		}
		maps.Copy(w.Header(), a.Header)
		w.WriteHeader(a.Status)
		_, _ = w.Write(a.Body)
		return resultHandshake, rej, d, r, nil
	}
	if d, err = v.verifier.Verify(req, v.now()); err != nil {
		cause := err
		if rej, err = verify.Rejection(err); err != cause {
			v.logger.Debug("webhook rejected: the cause", zap.String("reason", rej.Code), zap.Error(cause))
		}
		return rej.Code, rej, d, r, err
	}
	return "accepted", rej, d, r, nil
}

// arrived returns the method and the URL the provider called, as twilio
// and rfc9421 sign them: the request's own before any rewrite before
// webhook_verify (handle_path, method), or the url override with its
// placeholders.
func (v *Verify) arrived(r *http.Request) (method, url string) {
	method, uri := r.Method, r.URL.RequestURI()
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
		method, uri = orig.Method, orig.URL.RequestURI()
	}
	if v.URL != "" {
		return method, r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).ReplaceAll(v.URL, "")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return method, scheme + "://" + r.Host + uri
}

// arrivedPath is the path r arrived at, before any rewrite.
func arrivedPath(r *http.Request) string {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
		return orig.URL.Path
	}
	return r.URL.Path
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	webhook_verify [<scheme>] {
//		scheme    <provider>|standard|rfc9421|hmac
//		secret    <secret>...          # rfc9421: secret <keyid> <key>, one per line; asana: none needed
//		tolerance <dur> [<future>]
//		max_body  <size>
//		url       <url with placeholders>  # twilio, rfc9421: the URL as the provider called it
//		id_header <name>               # rfc9421: the covered delivery-ID header
//		verify_token <token>           # meta: the subscription handshake's token
//		cloudevents_origins <origin>...
//		cloudevents_rate <rate>
//		topics <arn>...                # sns: the topics accepted
//		cert_hosts <host>...           # sns: where certificates may come from (default SNS's)
//		confirm_subscriptions          # sns: confirm a listed topic's subscription
//		audience <aud>                 # pubsub: the push subscription's audience
//		service_accounts <email>...    # pubsub: its service account
//		jwks_url <url>                 # pubsub: where Google's keys are (default Google's)
//		hmac {
//			id_header        <name>
//			timestamp_header <name>
//			timestamp_format unix|unix_ms|rfc3339
//			signature_header <name>
//			algorithm        sha1|sha256|sha512
//			encoding         hex|base64|base64url
//			prefix           <text>
//			content          <template over {id} {timestamp} {body}>
//			separator        <text>    # the signature header's fields: any prefixed one may match
//			timestamp_field  <name>    # the field that holds the timestamp (with separator)
//		}
//	}
//
// secret is repeatable; any one may match. One tolerance value applies in
// both directions; two are past, then future.
func (v *Verify) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return cfparse.Directive(d, &v.Scheme, "webhook_verify", cfparse.Block{
		{"scheme", func(d *caddyfile.Dispenser) error {
			scheme, err := cfparse.OneArg(d)
			switch {
			case err != nil:
				return err
			case v.Scheme != "":
				return d.Err("scheme given twice")
			case scheme == "rfc9421" && len(v.Secrets) > 0:
				return d.Err("scheme rfc9421 must come before its secrets: each is secret <keyid> <key>")
			}
			v.Scheme = scheme
			return nil
		}},
		{"secret", func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			switch {
			case len(args) == 0:
				return d.ArgErr()
			case v.Scheme == "rfc9421" && len(args) != 2:
				return d.Err("secret under rfc9421: want secret <keyid> <key>")
			case v.Scheme == "rfc9421":
				v.KeyIDs, args = append(v.KeyIDs, args[0]), args[1:]
			}
			v.Secrets = append(v.Secrets, args...)
			return nil
		}},
		{"url", cfparse.String(&v.URL)},
		{"id_header", cfparse.String(&v.IDHeader)},
		{"verify_token", cfparse.String(&v.VerifyToken)},
		{"cloudevents_rate", cfparse.String(&v.CloudEventsRate)},
		{"cloudevents_origins", cfparse.List(&v.CloudEventsOrigins)},
		{"topics", func(d *caddyfile.Dispenser) error { return cfparse.List(&made(&v.SNS).Topics)(d) }},
		{"cert_hosts", func(d *caddyfile.Dispenser) error { return cfparse.List(&made(&v.SNS).CertHosts)(d) }},
		{"confirm_subscriptions", func(d *caddyfile.Dispenser) error { return cfparse.Flag(&made(&v.SNS).ConfirmSubscriptions)(d) }},
		{"audience", func(d *caddyfile.Dispenser) error { return cfparse.String(&made(&v.PubSub).Audience)(d) }},
		{"service_accounts", func(d *caddyfile.Dispenser) error { return cfparse.List(&made(&v.PubSub).ServiceAccounts)(d) }},
		{"jwks_url", func(d *caddyfile.Dispenser) error { return cfparse.String(&made(&v.PubSub).JWKSURL)(d) }},
		{"tolerance", cfparse.OneOrTwo(&v.Tolerance, &v.FutureTolerance)},
		{"max_body", cfparse.Size(&v.MaxBody)},
		{"hmac", func(d *caddyfile.Dispenser) error {
			if d.NextArg() {
				return d.ArgErr()
			}
			h := new(verify.HMAC)
			v.HMAC = h
			return cfparse.ParseBlock(d, "hmac", cfparse.Block{
				{"id_header", cfparse.String(&h.IDHeader)},
				{"timestamp_header", cfparse.String(&h.TimestampHeader)},
				{"timestamp_format", cfparse.String(&h.TimestampFormat)},
				{"signature_header", cfparse.String(&h.SignatureHeader)},
				{"algorithm", cfparse.String(&h.Algorithm)},
				{"encoding", cfparse.String(&h.Encoding)},
				{"prefix", cfparse.String(&h.Prefix)},
				{"content", cfparse.String(&h.Content)},
				{"separator", cfparse.String(&h.Separator)},
				{"timestamp_field", cfparse.String(&h.TimestampField)},
			})
		}},
	}, "secret")
}

// made is *p, made on first use.
func made[T any](p **T) *T {
	if *p == nil {
		*p = new(T)
	}
	return *p
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Verify)(nil)
	_ caddyhttp.MiddlewareHandler = (*Verify)(nil)
	_ caddyfile.Unmarshaler       = (*Verify)(nil)
)
