package sender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/hookgate/hookgate/internal/netguard"
	"github.com/hookgate/hookgate/verify"
	"github.com/sony/gobreaker/v2"
)

// errTransient marks a failure the breaker counts.
var errTransient = errors.New("transient failure")

// deliver makes one attempt and returns its outcome. It makes none (the
// envelope is released, nothing charged) when the destination is paused or
// its breaker open, or when the attempt's timeout and the settle margin
// no longer fit in the lease.
func (s *Sender) deliver(ctx context.Context, d *destination, j job) Outcome {
	release := Outcome{Kind: Release, ID: j.ID, LeaseUntil: j.LeaseUntil}
	if d.pause.get() {
		// Paused (maybe by a 410 in flight beside it) since the lease.
		return release
	}
	if d.state() == gobreaker.StateOpen {
		// Opened (maybe by another instance) since the lease.
		return release
	}
	if time.Now().After(s.latestStart(j)) {
		// It waited (for the rate, for a worker) so long that its attempt
		// could outlive the lease, and another worker deliver it too.
		return release
	}
	e := j.Envelope
	start := s.now()
	res := s.attempt(d, e, start)
	// Every counted outcome goes into this instance's report on the
	// destination, and into its own breaker.
	if res.Breaker != BreakerNotCounted {
		d.shared.outcome(d.Name, res.Breaker == BreakerSuccess, s.now())
		s.breaker(d).count(res.Breaker == BreakerFailure)
	}
	now := s.now()
	if res.Breaker == BreakerFailure {
		s.failed(ctx, d, now)
	}
	latency := now.Sub(start)
	switch {
	case res.Delivered:
		s.obs.Attempt(d.Name, "2xx", latency)
		s.obs.Delivered(d.Name, now.Sub(e.CreatedAt))
		// The history shows the answer that delivered it.
		e.LastStatus, e.LastError, e.Class = e.Log[len(e.Log)-1].Status, "", ClassNone
		return Outcome{Kind: Delivered, ID: j.ID, LeaseUntil: j.LeaseUntil, Envelope: e}
	case res.Transient:
		s.obs.Attempt(d.Name, "transient", latency)
	default:
		s.obs.Attempt(d.Name, "permanent", latency)
	}
	next := *e
	if res.Transient && next.Attempts < s.cfg.Attempts {
		next.NextAt = now.Add(s.cfg.Backoff.Delay(next.Attempts, res.RetryAfter))
		return Outcome{Kind: Retry, ID: j.ID, LeaseUntil: j.LeaseUntil, Envelope: &next}
	}
	next.DeadAt = now
	s.obs.Dead(d.Name, now.Sub(firstFailure(&next)))
	s.noteDeath(d, now)
	if res.Pause {
		s.disable(ctx, d, PausedByGone, now.UTC().Truncate(time.Minute))
	}
	return Outcome{Kind: Dead, ID: j.ID, LeaseUntil: j.LeaseUntil, Envelope: &next}
}

// firstFailure is when the envelope's current run of attempts first
// failed.
func firstFailure(e *Envelope) time.Time {
	for i := len(e.Log) - 1; i >= 0; i-- {
		if i == 0 || e.Log[i-1].RedriveID != e.Log[i].RedriveID {
			return e.Log[i].At
		}
	}
	return e.CreatedAt
}

// maxErrorText bounds the error text kept per attempt.
const maxErrorText = 512

// attempt sends e once and records the attempt in e (Attempts, Log, the
// last status, error and class). It returns the classified result.
func (s *Sender) attempt(d *destination, e *Envelope, start time.Time) Result {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	status, header, said, err := s.post(ctx, d, e, start)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && err != nil {
		err = fmt.Errorf("%w after %s", errTimeout, s.cfg.Timeout)
	}
	res := Classify(status, header, err, s.now())
	e.Attempts++
	a := Attempt{At: start, Status: status, Latency: s.now().Sub(start), RedriveID: e.RedriveID}
	switch {
	case err != nil:
		a.Error = err.Error()
	case !res.Delivered:
		a.Error = http.StatusText(status)
		if said != "" {
			a.Error += ": " + said
		}
	}
	if len(a.Error) > maxErrorText {
		a.Error = strings.ToValidUTF8(a.Error[:maxErrorText], "")
	}
	e.Log = append(e.Log, a)
	if !res.Delivered {
		e.LastStatus, e.LastError, e.Class = status, a.Error, res.Class
	}
	return res
}

// post sends e's payload, signed, and reads the answer's status and
// headers (the body is drained, up to a bound, so the connection is
// reused). Of a failure's body it keeps the start, as one line of text:
// what the receiver said is what a person triaging needs. Its errors name
// the destination by d.origin only.
func (s *Sender) post(ctx context.Context, d *destination, e *Envelope, now time.Time) (int, http.Header, string, error) {
	req := d.newRequest(ctx, e)
	var err error
	if req.Header, err = d.header(e, now); err != nil {
		return 0, nil, "", &requestError{fmt.Errorf("signing: %w", err)}
	}
	if err := checkHeader(req.Header); err != nil {
		return 0, nil, "", &requestError{err}
	}
	resp, err := d.client.Do(req)
	if err != nil {
		var guard *netguard.RefusedError
		if refused(err) || errors.As(err, &guard) { // permanent: no retry reaches another answer
			err = &requestError{err}
		}
		return 0, nil, "", d.scrub(err)
	}
	defer func() { _ = resp.Body.Close() }() // a response body: nothing to flush
	said := ""
	if resp.StatusCode >= 300 {
		head := make([]byte, maxSaid)
		n, _ := io.ReadFull(resp.Body, head)
		said = oneLine(head[:n])
	}
	if resp.Body != http.NoBody {
		// Drained for the connection's reuse; the status is the answer.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	}
	return resp.StatusCode, resp.Header, said, nil
}

// newRequest is a POST of e's payload to d, as http.NewRequestWithContext
// makes it, from d's template: the URL is parsed once, not at each
// attempt, but for the path and query keep_path kept. GetBody lets the
// transport send it again when a kept-alive connection turns out closed
// before anything was written.
func (d *destination) newRequest(ctx context.Context, e *Envelope) *http.Request {
	tmpl := d.template()
	req := tmpl.WithContext(ctx)
	if e.Received != nil && e.Received.Path != "" {
		req.URL = joinURL(tmpl.URL, e.Received.Path)
	}
	payload := e.Payload
	req.ContentLength = int64(len(payload))
	if len(payload) == 0 {
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
		return req
	}
	req.Body = io.NopCloser(bytes.NewReader(payload))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(payload)), nil }
	return req
}

// scrub makes err name only d's scheme://host[:port]: Go's *url.Error
// prints the whole URL, whose user info, path and query may hold secrets.
func (d *destination) scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = d.origin
	}
	return err
}

// checkHeader refuses a header the transport would refuse: a name that is
// not a token, or a value holding a control character (a delivery ID with
// CR LF, signed into a header, say). Values are not quoted: one may hold a
// signature.
func checkHeader(h http.Header) error {
	for k, vs := range h {
		if k == "" || strings.IndexFunc(k, func(r rune) bool { return r >= 0x80 || !isTokenByte(byte(r)) }) >= 0 {
			return fmt.Errorf("invalid header field name %q", k)
		}
		for _, v := range vs {
			if strings.IndexFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) >= 0 {
				return fmt.Errorf("invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// isTokenByte reports whether c may be in an HTTP token (RFC 9110).
func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// refused reports an error of the transport refusing the request itself
// (Go gives these no type): class request, as checkHeader's.
func refused(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "net/http: invalid header") || strings.HasPrefix(msg, "net/http: invalid trailer") ||
		strings.HasPrefix(msg, "net/http: invalid method")
}

// maxSaid is how much of a failed answer's body an attempt keeps.
const maxSaid = 200

// oneLine is b as printable, valid UTF-8 on one line: control characters
// become spaces, runs of space one, a rune cut at the end dropped.
func oneLine(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), ""))
	return strings.Join(strings.Fields(s), " ")
}

// target is the URL of e's requests to d: d's, with the path and query
// keep_path kept appended.
func (d *destination) target(e *Envelope) string {
	if e.Received == nil || e.Received.Path == "" {
		return d.URL
	}
	return joinURL(d.template().URL, e.Received.Path).String()
}

// template is d's request template, made once (build checked its URL).
func (d *destination) template() *http.Request {
	d.reqOnce.Do(func() { d.request, _ = http.NewRequest(http.MethodPost, d.URL, nil) })
	return d.request
}

// cosigner is a Signer whose scheme may carry a rotation's old signature
// beside the new one: *verify.Verifier.
type cosigner interface {
	Cosign(h, previous http.Header) bool
}

// header is the header of e's request to d at now: the headers durable
// ingress kept, the destination's own (they win), the payload's content
// type (unless the destination sets one), Hookgate-Received-At and
// Hookgate-Source for a received request, the signature (it wins over
// any kept header), the trace context and the redrive ID.
func (d *destination) header(e *Envelope, now time.Time) (http.Header, error) {
	d.baseOnce.Do(func() {
		d.base = make(http.Header, len(d.Header)+2)
		for k, v := range d.Header {
			d.base[k] = v
		}
		d.hasCT = d.base.Get("Content-Type") != ""
		d.base.Set("User-Agent", "hookgate")
	})
	rec := e.Received
	var kept http.Header
	if rec != nil {
		kept = rec.Header
	}
	h := make(http.Header, len(kept)+len(d.base)+8)
	for k, v := range kept {
		h[k] = v
	}
	for k, v := range d.base {
		h[k] = v
	}
	if !d.hasCT {
		if e.ContentType == "" || e.ContentType == "application/json" {
			h["Content-Type"] = contentTypeJSON
		} else {
			h["Content-Type"] = []string{e.ContentType}
		}
	}
	if rec != nil {
		h.Set("Hookgate-Received-At", e.CreatedAt.UTC().Format(time.RFC3339))
		if rec.Source != "" {
			h.Set("Hookgate-Source", rec.Source)
		}
	}
	if d.Signer != nil {
		// The signature comes after the headers it may cover (rfc9421).
		req := verify.Request{Method: http.MethodPost, URL: d.target(e), Header: h, Body: e.Payload}
		sig, err := d.Signer.SignRequest(req, e.ID, now)
		if err != nil {
			return nil, err
		}
		if c, ok := d.Signer.(cosigner); ok && d.Previous != nil && now.Before(d.PreviousUntil) {
			// A rotation: the old secret signs too, until it expires.
			old, err := d.Previous.SignRequest(req, e.ID, now)
			if err != nil {
				return nil, err
			}
			c.Cosign(sig, old)
		}
		for k, v := range sig {
			h[k] = v
		}
	}
	if e.TraceParent != "" {
		// The enqueue's trace context, whole: a kept Tracestate or
		// Baggage (named in keep_headers) belonged to another trace.
		h.Set("Traceparent", e.TraceParent)
		h.Del("Tracestate")
		h.Del("Baggage")
		if e.TraceState != "" {
			h.Set("Tracestate", e.TraceState)
		}
	}
	if e.RedriveID != "" {
		h.Set("Hookgate-Redrive-Id", e.RedriveID)
	}
	return h, nil
}

// contentTypeJSON is the Content-Type of a JSON payload, shared by every
// request's header: never modified.
var contentTypeJSON = []string{"application/json"}
