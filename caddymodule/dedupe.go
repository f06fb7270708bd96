package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
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
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/forward"
	"github.com/hookgate/hookgate/internal/outage"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/reqbody"
	"github.com/hookgate/hookgate/internal/telemetry"
)

func init() {
	caddy.RegisterModule(Dedupe{})
	httpcaddyfile.RegisterHandlerDirective("webhook_dedupe", parseHandler[Dedupe])
	// Dedupe runs after encode, so it records the un-encoded response.
	httpcaddyfile.RegisterDirectiveOrder("webhook_dedupe", httpcaddyfile.After, "encode")
}

// Dedupe is the webhook_dedupe handler: the first copy of a delivery is
// forwarded and its final response recorded; every duplicate gets the
// record replayed, with Idempotent-Replayed: true, and the upstream sees
// nothing. State lives in the hookgate app's store.
type Dedupe struct {
	// Key is the idempotency key, a placeholder. Default: {webhook.id};
	// after webhook_verify of a delivery whose ID is not signed (github,
	// shopify, zoom, meta, twitter; hmac whose content does not sign {id};
	// rfc9421 whose signature covers no ID),
	// {webhook.scheme}:{webhook.secret_fingerprint}:{webhook.body_sha256},
	// since a captured request verifies under any ID; for twilio, and slack
	// requests without an event_id, {webhook.scheme}:{webhook.signature_sha256}.
	Key string `json:"key,omitempty"`

	// Retention is how long a record is kept, from when it is recorded:
	// longer than the sender's whole retry and redrive window. Default 168h.
	Retention caddy.Duration `json:"retention,omitempty"`

	// Lease bounds an in-flight claim and the forward under it. Default 30s.
	Lease caddy.Duration `json:"lease,omitempty"`

	// InFlight is what a copy gets while another is being forwarded:
	// "reject" (409 in_flight with Retry-After) or "wait" (wait up to
	// InFlightWait for the record, then replay it or reject). Default reject.
	InFlight string `json:"in_flight,omitempty"`

	// InFlightWait is how long "wait" waits. Default 5s.
	InFlightWait caddy.Duration `json:"in_flight_wait,omitempty"`

	// Record lists the status classes that are final outcomes, recorded and
	// replayed: "2xx", "3xx", "4xx". Default ["2xx"]: a 4xx is not recorded,
	// so a redrive after the receiver is fixed reaches it.
	Record []string `json:"record,omitempty"`

	// MaxRecord is the largest response body recorded, in bytes; a final
	// response with a larger body is recorded without it. Default 64 KiB.
	MaxRecord int64 `json:"max_record,omitempty"`

	// ReplayCache is how many records (bodies up to 4 KiB) each instance
	// keeps in memory to replay without a store round trip; records never
	// change once written, so a cached one is good until it expires.
	// Default 10000; -1 turns it off.
	ReplayCache int `json:"replay_cache,omitempty"`

	// OnStoreError is what happens when the store fails: "reject" (503 with
	// Retry-After, nothing forwarded) or "forward" (forward unprotected).
	// Default reject.
	OnStoreError string `json:"on_store_error,omitempty"`

	deduper  *dedupe.Deduper
	now      func() time.Time
	metrics  *telemetry.Metrics
	logger   *zap.Logger
	storeLog *outage.Log
	bufs     *sync.Pool
}

// CaddyModule returns the Caddy module information.
func (Dedupe) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.webhook_dedupe",
		New: func() caddy.Module { return new(Dedupe) },
	}
}

// Provision sets up the handler.
func (h *Dedupe) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.InFlight == "" {
		h.InFlight = "reject"
	}
	if len(h.Record) == 0 {
		h.Record = []string{"2xx"}
	}
	if h.OnStoreError == "" {
		h.OnStoreError = "reject"
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.bufs = &sync.Pool{New: func() any { return new(bytes.Buffer) }}
	h.storeLog = outage.NewLog(h.logger, "dedupe", h.now)
	if err := h.validate(); err != nil {
		return err
	}
	final, _ := dedupe.FinalClasses(h.Record) // checked by validate
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	h.metrics = app.metrics
	h.deduper, err = dedupe.New(app.useStore(), dedupe.Config{
		Lease:       time.Duration(h.Lease),
		Retention:   time.Duration(h.Retention),
		Wait:        waitFor(h.InFlight, &h.InFlightWait),
		Final:       final,
		MaxRecord:   int(h.MaxRecord),
		ReplayCache: h.ReplayCache,
	}, dedupe.WithClock(h.now))
	if err == nil {
		app.dedupers = append(app.dedupers, h.deduper)
	}
	return err
}

func (h *Dedupe) validate() error {
	if h.InFlight != "" && h.InFlight != "reject" && h.InFlight != "wait" {
		return fmt.Errorf("in_flight %q: want reject or wait", h.InFlight)
	}
	if h.InFlight != "wait" && h.InFlightWait != 0 {
		return fmt.Errorf("in_flight_wait needs in_flight wait")
	}
	if h.OnStoreError != "" && h.OnStoreError != "reject" && h.OnStoreError != "forward" {
		return fmt.Errorf("on_store_error %q: want reject or forward", h.OnStoreError)
	}
	if _, err := dedupe.FinalClasses(h.Record); err != nil {
		return err
	}
	if h.MaxRecord < 0 {
		return fmt.Errorf("max_record must not be negative")
	}
	if h.ReplayCache < -1 {
		return fmt.Errorf("replay_cache must be a number of entries, or -1 (off)")
	}
	return nil
}

// defaultKey is the key's placeholder when webhook_verify gave none:
// {webhook.id}, which another handler may set.
const defaultKey = "{webhook.id}"

// key resolves the idempotency key of r: the template's, or by default
// the key of the delivery webhook_verify verified (own, "" when none; by
// its ID, its body or its signature: verify.Delivery.DedupeKey). Every
// placeholder must resolve to something: an unknown one (no
// webhook_verify in front) or an empty one would otherwise leave one
// literal key shared by every request.
func (h *Dedupe) key(repl *caddy.Replacer, own string) (key string, rej problem.Reason, detail string) {
	// One placeholder: its value is the key, without a template's parse
	// and copy. An unknown or empty one takes the long way, for its error.
	tmpl := h.Key
	if tmpl == "" {
		tmpl, key = defaultKey, own
	} else if name, ok := placeholderOnly(tmpl); ok {
		key, _ = repl.GetString(name)
	}
	var err error
	if key == "" {
		key, err = repl.ReplaceOrErr(tmpl, true, true)
	}
	switch {
	case err != nil:
		return "", problem.MissingIdempotencyKey, "the idempotency key " + tmpl + " resolves to nothing: " + err.Error()
	case len(key) > dedupe.MaxKeyLen:
		return "", problem.IdempotencyKeyTooLong, fmt.Sprintf("the idempotency key is %d bytes, over %d", len(key), dedupe.MaxKeyLen)
	}
	return key, problem.Reason{}, ""
}

// placeholderOnly returns the name of the placeholder tmpl is, when tmpl
// is one placeholder and nothing else ({webhook.id}, not {a}{b} nor a
// file placeholder, nor one with escapes).
func placeholderOnly(tmpl string) (string, bool) {
	if len(tmpl) < 3 || tmpl[0] != '{' || tmpl[len(tmpl)-1] != '}' {
		return "", false
	}
	name := tmpl[1 : len(tmpl)-1]
	if strings.ContainsAny(name, "{}\\") || strings.HasPrefix(name, "file.") {
		return "", false
	}
	return name, true
}

// ServeHTTP dedupes the request.
func (h *Dedupe) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	ctx, span := telemetry.StartSpan(r.Context(), "webhook_dedupe")
	defer span.End()
	count := func(result string) { h.metrics.DedupeResult(span, result) }

	// The body webhook_verify read (within its max_body) is used as is;
	// without verify, dedupe reads at most DefaultMaxBody itself.
	r, body, err := bufferBody(withContext(r, ctx), DefaultMaxBody)
	if err != nil {
		count(reqbody.WriteRejection(w, err))
		return nil
	}
	ctx = r.Context()
	repl := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	b, _ := reqbody.Of(r) // bufferBody put it there
	key, rej, detail := h.key(repl, b.Delivery.DedupeKey(b.SHA256Hex))
	if rej != (problem.Reason{}) {
		count(rej.Code)
		problem.Write(w, rej, detail, 0)
		return nil
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("webhook.id", key))
	}

	cctx, claimSpan := telemetry.StartSpan(ctx, "webhook_dedupe.claim")
	// The fingerprint is shared with {webhook.body_sha256}: computed once.
	dec, err := h.deduper.BeginBody(cctx, key, body, b.SHA256)
	claimSpan.End()
	if err != nil && ctx.Err() != nil {
		return nil // the client left while its copy waited: nothing to answer
	}
	if err != nil {
		count("store_error")
		span.SetStatus(codes.Error, "store error")
		h.storeLog.Failed(err, zap.String("key", key), zap.String("on_store_error", h.OnStoreError))
		if h.OnStoreError == "forward" {
			return next.ServeHTTP(w, r)
		}
		problem.Write(w, problem.StoreUnavailable, "the dedupe store is unavailable, or too few of its replicas acknowledged the claim in time (min_replicas); nothing was forwarded", time.Second)
		return nil
	}
	h.storeLog.Answered()
	count(dec.Result)
	switch dec.Action {
	case dedupe.Replay:
		dec.Replay(w)
		return nil
	case dedupe.Reject:
		if errors.Is(dec.Err, dedupe.ErrKeyReused) {
			problem.Write(w, problem.KeyReusedWithDifferentPayload, dec.Err.Error(), 0)
			return nil
		}
		problem.Write(w, problem.InFlight, dec.Err.Error(), max(dec.RetryAfter(h.now()), time.Nanosecond))
		return nil
	}
	if dec.Result == "lease_expired" {
		h.logger.Warn("forwarding again after an expired lease: the previous forward may have reached the upstream",
			zap.String("key", key))
	}
	return h.forward(w, r, next, key, dec)
}

// forward sends the request upstream under the claim, detached from the
// client (a client that hangs up does not cancel it; the lease bounds it),
// settles the claim however the forward ends, then answers the client.
// The body is buffered up to max_record, then streams to the client; the
// outcome is still recorded, without it.
func (h *Dedupe) forward(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, key string, dec dedupe.Decision) error {
	buf := h.bufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			h.bufs.Put(buf)
		}
	}()
	// The span is looked up here: a lookup in the detached context boxes
	// it (an allocation), one in the request's does not.
	span := trace.SpanFromContext(r.Context())
	return forward.Send(w, r, next, forward.Config{
		LeaseUntil: dec.LeaseUntil,
		Lease:      h.deduper.Lease(),
		Buffer:     buf,
		MaxRecord:  h.deduper.MaxRecord(),
	}, func(detached context.Context, res *forward.Result) {
		h.settle(detached, span, key, dec, res)
	})
}

// settle ends the claim (Deduper.Settle: abandon, release or record)
// before the client gets its answer, and logs how. span is
// webhook_dedupe's, detached's.
func (h *Dedupe) settle(detached context.Context, span trace.Span, key string, dec dedupe.Decision, res *forward.Result) {
	rctx, recordSpan := telemetry.StartChildSpan(detached, span, "webhook_dedupe.record")
	rctx, cancelRecord := context.WithDeadline(rctx, res.SettleDeadline())
	after, before := res.Headers()
	how, err := h.deduper.Settle(rctx, key, dec, dedupe.Response{
		Status:   res.Status,
		Header:   after,
		Before:   before,
		Body:     res.Body,
		Streamed: res.Truncated,
		NotFinal: res.NotFinal,
	})
	cancelRecord()
	recordSpan.End()
	switch {
	case how == dedupe.SettledAbandoned && err != nil:
		h.logger.Error("releasing claim", zap.String("key", key), zap.Error(err))
	case errors.Is(err, dedupe.ErrClaimLost):
		h.logger.Warn("outcome not recorded: the lease expired and another forward took over", zap.String("key", key), zap.Int("status", res.Status))
	case err != nil:
		// Counted when the retry comes: it finds the claim expired
		// and is forwarded again as lease_expired.
		h.logger.Error("recording outcome failed until the lease ended: a retry will be forwarded again", zap.String("key", key), zap.Int("status", res.Status), zap.Error(err))
	}
	if how != dedupe.SettledAbandoned {
		recorded := how == dedupe.SettledRecorded
		if c := h.logger.Check(zapcore.DebugLevel, "forwarded"); c != nil {
			c.Write(zap.String("key", key), zap.Int("status", res.Status), zap.Bool("recorded", recorded))
		}
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("http.response.status_code", res.Status), attribute.Bool("hookgate.recorded", recorded))
		}
	}
	if res.ClientErr != nil {
		h.logger.Debug("the client left before the response ended; the forward ran to its end", zap.String("key", key), zap.Error(res.ClientErr))
	}
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	webhook_dedupe {
//		key        <placeholder>
//		retention  <duration>
//		lease      <duration>
//		in_flight  reject|wait <duration>
//		record     <status-class>...
//		max_record <size>
//		on_store_error reject|forward
//		replay_cache   <entries>|off
//	}
func (h *Dedupe) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := cfparse.Directive(d, nil, "webhook_dedupe", cfparse.Block{
		{"key", cfparse.String(&h.Key)},
		{"retention", cfparse.Duration(&h.Retention)},
		{"lease", cfparse.Duration(&h.Lease)},
		{"in_flight", waitOr("reject", &h.InFlight, &h.InFlightWait)},
		{"record", cfparse.List(&h.Record)},
		{"max_record", cfparse.Size(&h.MaxRecord)},
		{"on_store_error", cfparse.String(&h.OnStoreError)},
		{"replay_cache", func(d *caddyfile.Dispenser) error {
			v, err := cfparse.OneArg(d)
			if err != nil {
				return err
			}
			if v == "off" {
				h.ReplayCache = -1
			} else if h.ReplayCache, err = strconv.Atoi(v); err != nil || h.ReplayCache <= 0 {
				return d.Errf("replay_cache: want a positive number of entries, or off; got %q", v)
			}
			return nil
		}},
	})
	if err != nil {
		return err
	}
	return h.validate()
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Dedupe)(nil)
	_ caddyhttp.MiddlewareHandler = (*Dedupe)(nil)
	_ caddyfile.Unmarshaler       = (*Dedupe)(nil)
)
