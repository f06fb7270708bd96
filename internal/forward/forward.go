// Package forward sends a webhook to the upstream under a lease: the one
// code path that webhook_dedupe (under its claim) and webhook_freshness
// (under its entity lease) both forward through.
//
// The contract of Send:
//
//   - One send. The request reaches the handler below once. Go's HTTP
//     transport would resend a request on its own when a reused
//     connection closed after the upstream read it; Send makes the request
//     one the transport never resends. A retry is the sender's to make.
//   - Detached from the client. A client that hangs up does not cancel the
//     forward, because the upstream may already have acted: the handler
//     below runs under the request's context without its cancellation,
//     and once a write to the client fails, the rest of the answer is
//     still read from the upstream and discarded, so its status is known.
//   - Bounded by the lease. The forward's deadline is a margin before the
//     lease ends (a tenth of the lease, at most a second), so that its
//     outcome normally lands while the lease still holds.
//   - Settled, then answered. However the forward ends (an answer, an
//     error, a panic below: Caddy's reverse_proxy aborts with
//     http.ErrAbortHandler when a copy fails), the caller's settle function
//     runs first, with the outcome; only then does the client get its
//     answer. A buffered answer is written whole after the settle, so a
//     retry that follows it finds the outcome recorded. A response whose
//     status already went to the client and then failed is aborted, not
//     ended, so a truncated answer never looks whole.
//   - The settle deadline. The outcome's writes may be retried until the
//     lease ends, or for two seconds when it ends sooner or has ended
//     (Result.SettleDeadline): a late record is fenced by its token and a
//     late watermark is a max-register, so a late write is safe.
//
// Send holds no lease itself: the caller takes it before and settles it in
// its settle function.
//
// An outcome is final when it is the upstream's decision about this
// delivery: one that may be recorded and replayed to every later copy
// instead of forwarding it again. No status at all (upstream down, the
// deadline passed, a copy that failed before the status) is never final,
// nor is an answer that a handler below marked with MarkNotFinal (hookgate's
// own answers that ask for a retry): the mark travels on the response
// writer, as Caddy's own wrappers pass a writer down. Which received statuses are final
// beyond that is the caller's rule (webhook_dedupe's record classes).
package forward

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
)

// Handler is the handler below: reverse_proxy, or whatever the route
// holds. A caddyhttp.Handler is one.
type Handler interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// Config is what one forward runs under.
type Config struct {
	// LeaseUntil is when the lease held for the forward ends.
	LeaseUntil time.Time

	// Lease is the lease's whole length: the forward ends a tenth of it
	// (at most a second) before LeaseUntil.
	Lease time.Duration

	// Buffer, when set, makes the outcome one to record: the answer's body
	// is buffered in it, up to MaxRecord bytes (past that it streams), and
	// a handler below may mark its answer not final (MarkNotFinal). When
	// nil, the body streams from the start and such marks pass through,
	// to an enclosing forward. The caller owns the buffer; Send resets it.
	Buffer *bytes.Buffer

	// MaxRecord is the largest body buffered, with Buffer.
	MaxRecord int64
}

// Result is the outcome of a forward, as its settle function sees it.
type Result struct {
	// Status is the status the handler below answered, or 0 when it
	// answered none (upstream down, the deadline passed, a copy that failed
	// before the status).
	Status int

	// NotFinal is set, with Config.Buffer, when a handler below marked its
	// answer not final (MarkNotFinal).
	NotFinal bool

	// Body is the buffered body, with Config.Buffer.
	Body []byte

	// Truncated is set when Body is not the whole answer: it streamed past
	// MaxRecord (or was not buffered), or the forward ended in an error
	// or a panic, so the body may not have arrived whole.
	Truncated bool

	// ClientErr is the first write to the client that failed: the client
	// left, and the forward ran to its end without it.
	ClientErr error

	leaseUntil time.Time
	before     http.Header
	w          http.ResponseWriter
}

// Headers returns the response's header as it is after the forward, and
// as it was before it, for a caller that copies the headers the handlers
// below set: the fields whose values did not change (Server, a header
// directive's) are this gateway's, not the upstream's. Neither is the
// caller's to change.
func (r *Result) Headers() (after, before http.Header) {
	return r.w.Header(), r.before
}

// SettleDeadline is when the retries of the outcome's write should give
// up: when the lease ends, or minSettle from now, whichever is later.
func (r *Result) SettleDeadline() time.Time {
	return settleDeadline(time.Now(), r.leaseUntil)
}

// minSettle is how long a forward's outcome is written for, at least, even
// when the lease has already ended (a pause, a slow upstream): a late
// record is fenced by its token, and a late watermark is a max-register,
// so either is safe to write, and each is worth trying.
const minSettle = 2 * time.Second

func settleDeadline(now, leaseUntil time.Time) time.Time {
	if floor := now.Add(minSettle); floor.After(leaseUntil) {
		return floor
	}
	return leaseUntil
}

// margin is how long before its lease ends a forward's deadline is: a
// tenth of the lease, at most a second, so the outcome's write normally
// lands while the lease still holds and may use the rest of it.
func margin(lease time.Duration) time.Duration {
	return min(lease/10, time.Second)
}

// Send forwards r to next once, under the lease c describes and detached
// from the client, then calls settle with the outcome, then answers w. The
// context settle gets is r's without its cancellation or the forward's
// deadline; Result.SettleDeadline bounds the writes that must still land.
// settle must not keep the Result: its Body is the caller's buffer.
//
// Send returns next's error, for the calling handler to return. A panic
// below is raised again once settled, unless it is http.ErrAbortHandler
// and nothing was sent yet: then the client gets a 502
// upstream_response_incomplete (504 upstream_timeout when the forward's
// deadline had passed), with the response headers as they were before the
// forward.
func Send(w http.ResponseWriter, r *http.Request, next Handler, c Config, settle func(context.Context, *Result)) error {
	detached := context.WithoutCancel(r.Context())
	fctx, cancel := context.WithDeadline(detached, c.LeaseUntil.Add(-margin(c.Lease)))
	defer cancel()

	// The writer and the result in one allocation.
	st := &struct {
		fw  forwardWriter
		res Result
	}{fw: forwardWriter{w: w, buf: c.Buffer, limit: c.MaxRecord, records: c.Buffer != nil}}
	fw, res := &st.fw, &st.res
	if c.Buffer != nil {
		c.Buffer.Reset()
	}
	// Headers set before the forward (Server, a header directive's) are
	// this request's, not the upstream's.
	before := w.Header().Clone()
	fr := r.WithContext(fctx)
	oneShot(fr)
	panicked, err := serve(next, fw, fr)

	*res = Result{
		Status:     fw.status,
		Body:       fw.Body(),
		Truncated:  fw.Streamed() || panicked != nil || err != nil,
		ClientErr:  fw.clientErr,
		NotFinal:   fw.notFinal,
		leaseUntil: c.LeaseUntil,
		before:     before,
		w:          w,
	}
	if res.Status == 0 && err == nil && panicked == nil {
		res.Status = http.StatusOK
	}
	settle(detached, res)

	switch {
	case panicked != nil:
		answerAborted(w, fw, before, fctx, panicked)
		return nil
	case err != nil:
		return err
	}
	fw.finish()
	return nil
}

// serve runs next with fw, turning a panic (Caddy's reverse_proxy aborts
// with http.ErrAbortHandler when copying the response fails) into the
// value it returns, so the outcome can be settled before the answer.
func serve(next Handler, fw *forwardWriter, r *http.Request) (panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return nil, next.ServeHTTP(fw, r)
}

// answerAborted answers a client whose forward panicked, once the outcome
// is settled: a precise problem when nothing was written yet, else the
// connection is aborted (a truncated response must not look whole). A
// panic other than http.ErrAbortHandler is a bug below: it is raised
// again for Caddy to log.
// before is the response header as it was before the forward: the
// headers the upstream set are not this answer's.
func answerAborted(w http.ResponseWriter, fw *forwardWriter, before http.Header, fctx context.Context, panicked any) {
	if panicked != http.ErrAbortHandler {
		panic(panicked)
	}
	if fw.sent {
		panic(http.ErrAbortHandler)
	}
	h := w.Header()
	clear(h)
	for k, v := range before {
		h[k] = v
	}
	if errors.Is(fctx.Err(), context.DeadlineExceeded) {
		problem.Write(w, problem.UpstreamTimeout, "the upstream's response outlived the forward's deadline (the lease)", 0)
		return
	}
	problem.Write(w, problem.UpstreamResponseIncomplete, "the upstream's response ended before it was complete", 0)
}

// oneShot makes r a request the HTTP transport never sends twice on its
// own. Go's transport resends a request whose reused connection closed
// after the upstream read it when the request is "replayable": its body
// can be had again (GetBody) or it has none, and it is idempotent by
// method or by an Idempotency-Key or X-Idempotency-Key header. A webhook
// forward must reach the upstream once; a retry is the sender's to make.
func oneShot(r *http.Request) {
	r.GetBody = nil
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		return // a body that cannot be had again: never replayed
	}
	// A request without a body is replayable whatever GetBody says; the
	// transport finds the idempotency headers by their canonical names, so
	// they are sent under lower-case names, which HTTP treats as the same.
	for _, name := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		if v, ok := r.Header[name]; ok {
			delete(r.Header, name)
			r.Header[strings.ToLower(name)] = v
		}
	}
}

// MarkNotFinal tells the nearest enclosing forward that records its
// outcome (one with a Config.Buffer: webhook_dedupe's) that the answer
// being written to w is not final, whatever its status: hookgate's own
// answers that ask for a retry (webhook_freshness's entity_busy, a stale
// event under on_stale reject, an event time in the future). w is the
// writer the handler was given.
//
// The mark travels on the writer: MarkNotFinal follows w's Unwrap chain,
// as http.ResponseController does, past the writers of the handlers in
// between (Caddy's wrappers unwrap, and so does the tracing handler's) and
// of forwards that do not record, to the first forward that records.
// Outside such a forward, or behind a writer that does not unwrap, it
// does nothing.
func MarkNotFinal(w http.ResponseWriter) {
	for {
		if fw, ok := w.(*forwardWriter); ok && fw.records {
			fw.notFinal = true
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// forwardWriter is the response writer Send hands to the handler below
// (reverse_proxy, under webhook_dedupe and webhook_freshness). It
//
//   - records the status the upstream answered, whatever happens next;
//   - buffers the body up to a limit, so that a final outcome can be
//     recorded with it, and streams it to the client past that limit (a
//     Content-Length over the limit streams from the start);
//   - keeps a client that left from stopping the forward: once a write to
//     the client fails, the rest of the body is still read from the
//     upstream and discarded, so the upstream's answer is seen to its end.
type forwardWriter struct {
	w         http.ResponseWriter // the client
	buf       *bytes.Buffer       // nil: stream from the start
	limit     int64
	status    int
	sent      bool  // the status line went to the client
	clientErr error // the first failed write to the client
	records   bool  // the forward records its outcome (Config.Buffer)
	notFinal  bool  // a handler below marked its answer (MarkNotFinal)
}

func (f *forwardWriter) Header() http.Header { return f.w.Header() }

// Unwrap lets http.ResponseController reach the client's writer.
func (f *forwardWriter) Unwrap() http.ResponseWriter { return f.w }

func (f *forwardWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		if f.clientErr == nil && !f.sent {
			f.w.WriteHeader(code) // informational: passed on at once
		}
		return
	}
	if f.status != 0 {
		return
	}
	f.status = code
	if f.buf != nil {
		if n, err := strconv.ParseInt(f.w.Header().Get("Content-Length"), 10, 64); err == nil && n > f.limit {
			f.buf = nil // too large to record: stream it
		}
	}
	if f.buf == nil {
		f.sendHeader()
	}
}

func (f *forwardWriter) Write(p []byte) (int, error) {
	if f.status == 0 {
		f.WriteHeader(http.StatusOK)
	}
	if f.buf != nil {
		if int64(f.buf.Len()+len(p)) <= f.limit {
			return f.buf.Write(p)
		}
		// Over the limit: what was buffered goes first, then the rest
		// streams; the outcome is recorded without its body.
		buffered := f.buf.Bytes()
		f.buf = nil
		f.sendHeader()
		f.toClient(buffered)
	}
	f.toClient(p)
	return len(p), nil
}

// sendHeader writes the status line to the client.
func (f *forwardWriter) sendHeader() {
	f.sent = true
	f.w.WriteHeader(f.status)
}

// toClient writes p to the client; after a failed write, nothing more is
// written and the bytes are discarded.
func (f *forwardWriter) toClient(p []byte) {
	if f.clientErr != nil || len(p) == 0 {
		return
	}
	if _, err := f.w.Write(p); err != nil { //nolint:gosec // G705: p is the upstream's response, forwarded as is: a proxy's job
		f.clientErr = err
	}
}

// FlushError flushes what streams to the client; a buffered body is not
// flushed (it is written whole when the forward ends).
func (f *forwardWriter) FlushError() error {
	if f.buf == nil && f.sent && f.clientErr == nil {
		if err := http.NewResponseController(f.w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			f.clientErr = err
		}
	}
	return nil
}

// Streamed reports whether the body went to the client unbuffered, so it
// is not recorded.
func (f *forwardWriter) Streamed() bool { return f.buf == nil }

// Body is the buffered body.
func (f *forwardWriter) Body() []byte {
	if f.buf == nil {
		return nil
	}
	return f.buf.Bytes()
}

// finish writes a buffered response to the client, when the forward
// ended normally.
func (f *forwardWriter) finish() {
	if f.buf == nil || f.sent {
		return
	}
	if f.status == 0 {
		f.status = http.StatusOK
	}
	f.sendHeader()
	f.toClient(f.buf.Bytes())
}
