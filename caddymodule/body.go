package caddymodule

import (
	"context"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/hookgate/hookgate/internal/reqbody"
)

// DefaultMaxBody is the default largest body a hookgate handler reads (its
// max_body, or the limit of dedupe and freshness without verify): 1 MiB.
const DefaultMaxBody = reqbody.DefaultMax

// bufferBody is reqbody.Buffer, with the body's placeholders,
// {webhook.json.<path>} and {webhook.body_sha256}, set from then on.
func bufferBody(r *http.Request, limit int64) (*http.Request, []byte, error) {
	r, body, b, err := reqbody.Buffer(r, limit)
	if b != nil {
		if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
			repl.Map(b.Placeholder)
		}
	}
	return r, body, err
}

// withContext is r.WithContext, without the copy when ctx is r's already.
func withContext(r *http.Request, ctx context.Context) *http.Request {
	if ctx == r.Context() {
		return r
	}
	return r.WithContext(ctx)
}
