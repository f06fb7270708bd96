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
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/verify"
)

// DefaultMaxBody is the default largest body a hookgate handler reads (its
// max_body, or the limit of dedupe and freshness without verify): 1 MiB.
const DefaultMaxBody = 1 << 20

// provisionMaxBody is a handler's max_body after Provision: DefaultMaxBody
// when unset, an error when negative.
func provisionMaxBody(n int64) (int64, error) {
	switch {
	case n == 0:
		return DefaultMaxBody, nil
	case n < 0:
		return 0, errors.New("max_body must be positive")
	}
	return n, nil
}

// bodyCtxKey keys the request body, read once by the first webhook handler.
type bodyCtxKey struct{}

var errBodyTooLarge = errors.New("body too large")

// initialBodyBuffer caps the buffer allocated up front from Content-Length.
const initialBodyBuffer = 64 << 10

// requestBody is a request's body as the first webhook handler read it,
// carried in the request's context for the next ones: the bytes, the
// reader the handler below reads them again from, and their SHA-256,
// computed once, when {webhook.body_sha256} or webhook_dedupe's
// fingerprint first needs it; and what webhook_verify made of the request,
// which webhook_dedupe's default key follows. One allocation holds it all.
type requestBody struct {
	bytes    []byte
	reader   bodyReader
	limit    io.LimitedReader
	once     sync.Once
	sum      dedupe.Fingerprint
	delivery verify.Delivery // set by webhook_verify when the request verifies
}

// bodyReader reads the body again, for the handler below.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// sha256 is the body's SHA-256 (its dedupe.Fingerprint), computed on the
// first call.
func (b *requestBody) sha256() dedupe.Fingerprint {
	b.once.Do(func() { b.sum = sha256.Sum256(b.bytes) })
	return b.sum
}

// sha256Hex is the body's SHA-256 in hex, {webhook.body_sha256}.
func (b *requestBody) sha256Hex() string {
	sum := b.sha256()
	return hex.EncodeToString(sum[:])
}

// getBody is the request's GetBody: a new reader over the body.
func (b *requestBody) getBody() (io.ReadCloser, error) {
	r := new(bodyReader)
	r.Reset(b.bytes)
	return r, nil
}

// bodyOf returns the body an earlier handler read for r, if one did.
func bodyOf(r *http.Request) (*requestBody, bool) {
	b, ok := r.Context().Value(bodyCtxKey{}).(*requestBody)
	return b, ok
}

// bufferBody returns r carrying its body, read at most once per request: a
// handler earlier in the chain may already have read it, within its own
// limit, and then r is returned as it is. Otherwise it reads up to limit
// and returns a request whose context holds the body and whose Body reads
// it again for the next handler; the body's placeholders,
// {webhook.json.<path>} and {webhook.body_sha256}, are set from then on.
func bufferBody(r *http.Request, limit int64) (*http.Request, []byte, error) {
	if b, ok := bodyOf(r); ok {
		return r, b.bytes, nil
	}
	b := new(requestBody)
	body, err := b.read(r, limit)
	if err != nil {
		return r, nil, err
	}
	b.bytes = body
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Map(b.placeholder)
	}
	r = r.WithContext(context.WithValue(r.Context(), bodyCtxKey{}, b))
	b.reader.Reset(body)
	r.Body = &b.reader
	r.ContentLength = int64(len(body))
	r.GetBody = b.getBody
	return r, body, nil
}

// bodyRejection maps a bufferBody error to its reason.
func bodyRejection(err error) problem.Reason {
	if errors.Is(err, errBodyTooLarge) {
		return problem.BodyTooLarge
	}
	return problem.BodyUnreadable
}

// writeBodyRejection answers a bufferBody error as problem+json and
// returns its reason code.
func writeBodyRejection(w http.ResponseWriter, err error) (reason string) {
	rej := bodyRejection(err)
	problem.Write(w, rej, err.Error(), 0)
	return rej.Code
}

// read reads at most limit bytes of r's body, through b's limited reader.
func (b *requestBody) read(r *http.Request, limit int64) ([]byte, error) {
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
	b.limit = io.LimitedReader{R: r.Body, N: limit + 1}
	n, err := buf.ReadFrom(&b.limit)
	b.limit.R = nil // the request's own body is done with
	if err != nil {
		if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
			return nil, fmt.Errorf("%w: over the server's request_body limit of %d bytes", errBodyTooLarge, tooBig.Limit)
		}
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if n > limit {
		return nil, fmt.Errorf("%w: over %d bytes", errBodyTooLarge, limit)
	}
	return buf.Bytes(), nil
}

// placeholder resolves {webhook.json.<path>} against the body, with gjson
// path syntax (a body that is not JSON resolves every path to ""),
// {webhook.body_sha256}, the body's SHA-256 in hex, and the delivery's
// {webhook.signature_sha256} and {webhook.secret_fingerprint}, when
// webhook_verify set them (else they are unknown).
func (b *requestBody) placeholder(key string) (any, bool) {
	switch key {
	case "webhook.body_sha256":
		return b.sha256Hex(), true
	case "webhook.signature_sha256":
		return b.delivery.SignatureSHA256, b.delivery.SignatureSHA256 != ""
	case "webhook.secret_fingerprint":
		return b.delivery.SecretFingerprint, b.delivery.SecretFingerprint != ""
	}
	path, ok := strings.CutPrefix(key, "webhook.json.")
	if !ok {
		return nil, false
	}
	return gjson.GetBytes(b.bytes, path).String(), true
}

// withContext is r.WithContext, without the copy when ctx is r's already.
func withContext(r *http.Request, ctx context.Context) *http.Request {
	if ctx == r.Context() {
		return r
	}
	return r.WithContext(ctx)
}
