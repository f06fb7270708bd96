package caddymodule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/telemetry"
	"github.com/hookgate/hookgate/verify"
)

func init() {
	caddy.RegisterModule(Verify{})
}

// DefaultMaxBody is the default largest body webhook_verify reads: 1 MiB.
const DefaultMaxBody = 1 << 20

// DevSecret is the public development secret of the README's quickstart:
// running on it logs a warning.
const DevSecret = "whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA=="

// Verify is the webhook_verify handler: it checks the signature over the
// raw body and the timestamp window, and forwards only genuine requests,
// with the body unchanged. It sets the placeholders {webhook.id},
// {webhook.timestamp}, {webhook.scheme}, {webhook.json.<path>} and
// {webhook.body_sha256}.
type Verify struct {
	// Scheme is the signature format: standard, stripe, github, shopify,
	// slack or hookgate. Default: standard.
	Scheme string `json:"scheme,omitempty"`

	// Secrets are the signing secrets; a request is genuine when any one
	// matches (rotation). Placeholders {env.*} and {file.*} are replaced
	// when the config loads. Required.
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
	if v.MaxBody == 0 {
		v.MaxBody = DefaultMaxBody
	}
	if v.MaxBody < 0 {
		return fmt.Errorf("max_body must be positive")
	}
	if v.now == nil {
		v.now = time.Now
	}
	repl := caddy.NewReplacer()
	secrets := make([]string, len(v.Secrets))
	for i, s := range v.Secrets {
		val, err := repl.ReplaceOrErr(s, true, true)
		if err != nil {
			return fmt.Errorf("secret %d: %w", i+1, err)
		}
		secrets[i] = strings.TrimSpace(val)
	}
	if v.HMAC != nil && v.Scheme != "hmac" {
		return fmt.Errorf("an hmac block needs scheme hmac, not %s", v.Scheme)
	}
	verifier, err := verify.New(v.Scheme, secrets, verify.Options{
		Past:   time.Duration(v.Tolerance),
		Future: time.Duration(v.FutureTolerance),
		HMAC:   v.HMAC,
	})
	if err != nil {
		return err
	}
	v.verifier = verifier
	if slices.Contains(secrets, DevSecret) {
		v.logger.Warn("webhook_verify runs on the public development secret: anyone can forge requests; set HOOKGATE_SECRET to a secret of your own")
	}
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	v.metrics = app.metrics
	return nil
}

// ServeHTTP verifies the request and hands it on, or rejects it.
func (v *Verify) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	ctx, span := startSpan(r.Context(), "webhook_verify",
		trace.WithAttributes(attribute.String("hookgate.scheme", v.Scheme)))
	defer span.End()

	r = withContext(r, ctx)
	result, status, d, r, err := v.check(r)
	v.metrics.Verified(ctx, v.Scheme, result)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("hookgate.result", result))
	}
	if err != nil {
		span.SetStatus(codes.Error, result)
		if c := v.logger.Check(zapcore.DebugLevel, "webhook rejected"); c != nil {
			c.Write(zap.String("reason", result), zap.String("detail", err.Error()), zap.String("remote", r.RemoteAddr))
		}
		problem.Write(w, status, result, err.Error(), 0)
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
	return next.ServeHTTP(w, r)
}

// check reads the body and verifies the request. It returns the metric
// result (the reason code on failure), the rejection status, the request
// carrying its buffered body, and the error.
func (v *Verify) check(r *http.Request) (result string, status int, d verify.Delivery, _ *http.Request, err error) {
	r, body, err := bufferBody(r, v.MaxBody)
	if err != nil {
		result, status = bodyRejection(err)
		return result, status, d, r, err
	}
	d, err = v.verifier.Verify(r.Header, body, v.now())
	switch {
	case err == nil:
		return "accepted", 0, d, r, nil
	case errors.Is(err, verify.ErrMissingHeader):
		return "missing_header", http.StatusBadRequest, d, r, err
	case errors.Is(err, verify.ErrMalformedHeader):
		return "malformed_header", http.StatusBadRequest, d, r, err
	case errors.Is(err, verify.ErrTimestampOutOfTolerance):
		return "timestamp_out_of_tolerance", http.StatusUnauthorized, d, r, err
	default:
		return "bad_signature", http.StatusUnauthorized, d, r, verify.ErrBadSignature
	}
}

// bodyCtxKey keys the request body, read once by the first webhook handler.
type bodyCtxKey struct{}

var errBodyTooLarge = errors.New("body too large")

// initialBodyBuffer caps the buffer allocated up front from Content-Length.
const initialBodyBuffer = 64 << 10

// bufferBody returns r carrying its body, read at most once per request: a
// handler earlier in the chain may already have read it, within its own
// limit, and then r is returned as it is. Otherwise it reads up to limit
// and returns a request whose context holds the body and whose Body reads
// it again for the next handler; the body's placeholders,
// {webhook.json.<path>} and {webhook.body_sha256}, are set from then on.
func bufferBody(r *http.Request, limit int64) (*http.Request, []byte, error) {
	if b, ok := r.Context().Value(bodyCtxKey{}).([]byte); ok {
		return r, b, nil
	}
	body, err := readBody(r, limit)
	if err != nil {
		return r, nil, err
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Map(bodyPlaceholders(body))
	}
	r = r.WithContext(context.WithValue(r.Context(), bodyCtxKey{}, body))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r, body, nil
}

// bodyRejection maps a bufferBody error to its reason and status.
func bodyRejection(err error) (reason string, status int) {
	if errors.Is(err, errBodyTooLarge) {
		return "body_too_large", http.StatusRequestEntityTooLarge
	}
	return "body_unreadable", http.StatusBadRequest
}

// readBody reads at most limit bytes of r's body.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: Content-Length %d is over %d bytes", errBodyTooLarge, r.ContentLength, limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// Trust the client's Content-Length only so far: a forger could
		// otherwise pin max_body of memory per connection without sending it.
		// ReadFrom wants MinRead bytes free to read the EOF: without them
		// a body of exactly Content-Length would be copied to a buffer
		// twice the size.
		buf.Grow(int(min(r.ContentLength, initialBodyBuffer)) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
		return nil, fmt.Errorf("%w: over the server's request_body limit of %d bytes", errBodyTooLarge, tooBig.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if n > limit {
		return nil, fmt.Errorf("%w: over %d bytes", errBodyTooLarge, limit)
	}
	return buf.Bytes(), nil
}

// bodyPlaceholders resolves {webhook.json.<path>} against the body, with
// gjson path syntax (a body that is not JSON resolves every path to ""),
// and {webhook.body_sha256}, the body's SHA-256 in hex, computed once.
func bodyPlaceholders(body []byte) caddy.ReplacerFunc {
	sum := sync.OnceValue(func() string {
		s := sha256.Sum256(body)
		return hex.EncodeToString(s[:])
	})
	return func(key string) (any, bool) {
		if key == "webhook.body_sha256" {
			return sum(), true
		}
		path, ok := strings.CutPrefix(key, "webhook.json.")
		if !ok {
			return nil, false
		}
		return gjson.GetBytes(body, path).String(), true
	}
}

// startSpan starts a child span of ctx's with hookgate's tracer from the
// span's provider: Caddy does not set a global provider, its tracing
// handler puts the span in the context. Without tracing (no span in
// ctx, so its provider is the no-op one) it returns ctx and its no-op span
// as they are: a no-op child would record nothing either, and would cost
// a context and a request copy per handler.
func startSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() && !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer("github.com/hookgate/hookgate").Start(ctx, name, opts...)
}

// withContext is r.WithContext, without the copy when ctx is r's already.
func withContext(r *http.Request, ctx context.Context) *http.Request {
	if ctx == r.Context() {
		return r
	}
	return r.WithContext(ctx)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Verify)(nil)
	_ caddyhttp.MiddlewareHandler = (*Verify)(nil)
)
