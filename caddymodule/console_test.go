package caddymodule

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestMountPath: the console's links start with the prefix handle_path
// stripped, cleaned as Caddy's matchers clean it, and never with "//"
// (a browser would read the next segment as a host).
func TestMountPath(t *testing.T) {
	for _, tt := range []struct{ orig, rest, want string }{
		{"/console/", "/", "/console"},
		{"/console/dead/x", "/dead/x", "/console"},
		{"/a/b/console/dead", "/dead", "/a/b/console"},
		{"/dead", "/dead", ""},
		{"//subscriber/dead", "/dead", "/subscriber"},
		{"//evil.example/../subscriber/dead/a-1/replay", "/dead/a-1/replay", "/subscriber"},
		{"/console/dead/b%2F1", "/dead/b%2F1", "/console"},
		{"/elsewhere", "/dead", ""},
	} {
		orig := httptest.NewRequest("GET", "http://gw"+tt.orig, nil)
		r := httptest.NewRequest("GET", "http://gw"+tt.rest, nil)
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.OriginalRequestCtxKey, *orig))
		if got := mountPath(r); got != tt.want {
			t.Errorf("orig %s, rest %s: base %q, want %q", tt.orig, tt.rest, got, tt.want)
		}
	}
	if got := mountPath(httptest.NewRequest("GET", "/x", nil)); got != "" {
		t.Errorf("no original request: %q", got)
	}
}

func TestClientChosenScope(t *testing.T) {
	for p, want := range map[string]bool{
		"{http.auth.user.id}":                false,
		"enrollment":                         false,
		"{http.request.header.X-Subscriber}": true,
		"{query.dest}":                       true,
		"{http.request.cookie.who}":          true,
		"{http.request.uri.path.1}":          true,
		"sub-{http.request.header.Host}":     true,
	} {
		if got := clientChosen(p); got != want {
			t.Errorf("clientChosen(%q) = %v, want %v", p, got, want)
		}
	}
}
