// Package reqbody reads a webhook request's body once, within a limit,
// for every hookgate handler of the request: the first reads it and
// carries it in the request's context, with its SHA-256 (computed once,
// on first use) and what webhook_verify made of the request; the next
// ones, and the handler below, read it again from there.
package reqbody

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/verify"
)

// DefaultMax is the default largest body a hookgate handler reads (its
// max_body, or the limit of dedupe and freshness without verify): 1 MiB.
const DefaultMax = 1 << 20

// Max is a handler's max_body after Provision: DefaultMax when unset, an
// error when negative.
func Max(n int64) (int64, error) {
	switch {
	case n == 0:
		return DefaultMax, nil
	case n < 0:
		return 0, errors.New("max_body must be positive")
	}
	return n, nil
}

// ctxKey keys the request body, read once by the first webhook handler.
type ctxKey struct{}

var errTooLarge = errors.New("body too large")

// initialBuffer caps the buffer allocated up front from Content-Length.
const initialBuffer = 64 << 10

// Body is a request's body as the first webhook handler read it, carried
// in the request's context for the next ones: the bytes, the reader the
// handler below reads them again from, and their SHA-256, computed once,
// when {webhook.body_sha256} or webhook_dedupe's fingerprint first needs
// it; and what webhook_verify made of the request, which webhook_dedupe's
// default key follows. One allocation holds it all.
type Body struct {
	bytes  []byte
	reader reader
	limit  io.LimitedReader
	once   sync.Once
	sum    dedupe.Fingerprint
	// Delivery is set by webhook_verify when the request verifies.
	Delivery verify.Delivery
}

// reader reads the body again, for the handler below.
type reader struct{ bytes.Reader }

func (*reader) Close() error { return nil }

// SHA256 is the body's SHA-256 (its dedupe.Fingerprint), computed on the
// first call.
func (b *Body) SHA256() dedupe.Fingerprint {
	b.once.Do(func() { b.sum = sha256.Sum256(b.bytes) })
	return b.sum
}

// SHA256Hex is the body's SHA-256 in hex, {webhook.body_sha256}.
func (b *Body) SHA256Hex() string {
	sum := b.SHA256()
	return hex.EncodeToString(sum[:])
}

// getBody is the request's GetBody: a new reader over the body.
func (b *Body) getBody() (io.ReadCloser, error) {
	r := new(reader)
	r.Reset(b.bytes)
	return r, nil
}

// Of returns the body an earlier handler read for r, if one did.
func Of(r *http.Request) (*Body, bool) {
	b, ok := r.Context().Value(ctxKey{}).(*Body)
	return b, ok
}

// Buffer returns r carrying its body, read at most once per request: a
// handler earlier in the chain may already have read it, within its own
// limit, and then r is returned as it is, with a nil *Body. Otherwise it
// reads up to limit and returns a request whose context holds the body
// (returned, for its placeholders) and whose Body reads it again for the
// next handler.
func Buffer(r *http.Request, limit int64) (*http.Request, []byte, *Body, error) {
	if b, ok := Of(r); ok {
		return r, b.bytes, nil, nil
	}
	b := new(Body)
	body, err := b.read(r, limit)
	if err != nil {
		return r, nil, nil, err
	}
	b.bytes = body
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, b))
	b.reader.Reset(body)
	r.Body = &b.reader
	r.ContentLength = int64(len(body))
	r.GetBody = b.getBody
	return r, body, b, nil
}

// Rejection maps a Buffer error to its reason.
func Rejection(err error) problem.Reason {
	if errors.Is(err, errTooLarge) {
		return problem.BodyTooLarge
	}
	return problem.BodyUnreadable
}

// WriteRejection answers a Buffer error as problem+json and returns its
// reason code.
func WriteRejection(w http.ResponseWriter, err error) (reason string) {
	rej := Rejection(err)
	problem.Write(w, rej, err.Error(), 0)
	return rej.Code
}

// read reads at most limit bytes of r's body, through b's limited reader.
func (b *Body) read(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: Content-Length %d is over %d bytes", errTooLarge, r.ContentLength, limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// Trust the client's Content-Length only so far: a forger could
		// otherwise pin max_body of memory per connection without sending it.
		// ReadFrom wants MinRead bytes free to read the EOF: without them
		// a body of exactly Content-Length would be copied to a buffer
		// twice the size.
		buf.Grow(int(min(r.ContentLength, initialBuffer)) + bytes.MinRead)
	}
	b.limit = io.LimitedReader{R: r.Body, N: limit + 1}
	n, err := buf.ReadFrom(&b.limit)
	b.limit.R = nil // the request's own body is done with
	if err != nil {
		if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
			return nil, fmt.Errorf("%w: over the server's request_body limit of %d bytes", errTooLarge, tooBig.Limit)
		}
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if n > limit {
		return nil, fmt.Errorf("%w: over %d bytes", errTooLarge, limit)
	}
	return buf.Bytes(), nil
}

// Placeholder resolves {webhook.json.<path>} against the body, with gjson
// path syntax (a body that is not JSON resolves every path to ""),
// {webhook.body_sha256}, the body's SHA-256 in hex, and the delivery's
// {webhook.signature_sha256} and {webhook.secret_fingerprint}, when
// webhook_verify set them (else they are unknown).
func (b *Body) Placeholder(key string) (any, bool) {
	switch key {
	case "webhook.body_sha256":
		return b.SHA256Hex(), true
	case "webhook.signature_sha256":
		return b.Delivery.SignatureSHA256, b.Delivery.SignatureSHA256 != ""
	case "webhook.secret_fingerprint":
		return b.Delivery.SecretFingerprint, b.Delivery.SecretFingerprint != ""
	}
	path, ok := strings.CutPrefix(key, "webhook.json.")
	if !ok {
		return nil, false
	}
	return gjson.GetBytes(b.bytes, path).String(), true
}
