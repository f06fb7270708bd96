package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/internal/problem"
)

// forwardWriter is the response writer that webhook_dedupe and
// webhook_freshness hand to the handlers below them (reverse_proxy). It
//
//   - records the status the upstream answered, whatever happens next;
//   - buffers the body up to a limit, so that a final outcome can be
//     recorded with it, and streams it to the client past that limit (a
//     Content-Length over the limit streams from the start);
//   - keeps a client that left from stopping the forward: once a write to
//     the client fails, the rest of the body is still read from the
//     upstream and discarded, so the upstream's answer is seen to its end.
type forwardWriter struct {
	w      http.ResponseWriter // the client
	buf    *bytes.Buffer       // nil: stream from the start
	limit  int64
	status int
	// sent is set once the status line went to the client; overflowed when
	// the body outgrew the buffer and streamed (it is not recorded).
	sent, overflowed bool
	clientErr        error // the first failed write to the client
}

// newForwardWriter returns a writer that buffers up to limit bytes in buf,
// or streams from the start when buf is nil.
func newForwardWriter(w http.ResponseWriter, buf *bytes.Buffer, limit int64) *forwardWriter {
	return &forwardWriter{w: w, buf: buf, limit: limit}
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
			f.overflowed = true
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
		f.overflowed = true
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
	if _, err := f.w.Write(p); err != nil {
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

// serveForward runs next with fw, turning a panic (Caddy's reverse_proxy
// aborts with http.ErrAbortHandler when copying the response fails) into
// the value it returns, so the caller can settle its claim or lease before
// it answers.
func serveForward(next caddyhttp.Handler, fw *forwardWriter, r *http.Request) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return next.ServeHTTP(fw, r), nil
}

// answerAborted answers a client whose forward panicked, once the caller
// has settled its state: a precise problem when nothing was written yet,
// else the connection is aborted (a truncated response must not look
// whole). A panic other than http.ErrAbortHandler is a bug below: it is
// raised again for Caddy to log.
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
		problem.Write(w, http.StatusGatewayTimeout, "upstream_timeout", "the upstream's response outlived the forward's deadline (the lease)", 0)
		return
	}
	problem.Write(w, http.StatusBadGateway, "upstream_response_incomplete", "the upstream's response ended before it was complete", 0)
}

// minSettle is how long a forward's outcome is written for, at least, even
// when the lease has already ended (a pause, a slow upstream): a late
// record is fenced by its token, and a late watermark is a max-register,
// so either is safe to write, and each is worth trying.
const minSettle = 2 * time.Second

// settleDeadline is when the retries of a forward's outcome give up: when
// the lease ends, or minSettle from now, whichever is later.
func settleDeadline(leaseUntil time.Time) time.Time {
	if floor := time.Now().Add(minSettle); floor.After(leaseUntil) {
		return floor
	}
	return leaseUntil
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
