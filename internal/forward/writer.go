package forward

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
)

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
