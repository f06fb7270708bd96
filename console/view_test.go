package console

import "testing"

// TestMountBase: the console's links start with the prefix handle_path
// stripped, cleaned as Caddy's matchers clean it, and never with "//"
// (a browser would read the next segment as a host).
func TestMountBase(t *testing.T) {
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
		if got := MountBase(tt.orig, tt.rest); got != tt.want {
			t.Errorf("orig %s, rest %s: base %q, want %q", tt.orig, tt.rest, got, tt.want)
		}
	}
}

func TestClientChosen(t *testing.T) {
	for p, want := range map[string]bool{
		"{http.auth.user.id}":                false,
		"enrollment":                         false,
		"{http.request.header.X-Subscriber}": true,
		"{query.dest}":                       true,
		"{http.request.cookie.who}":          true,
		"{http.request.uri.path.1}":          true,
		"sub-{http.request.header.Host}":     true,
	} {
		if got := ClientChosen(p); got != want {
			t.Errorf("ClientChosen(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestBy(t *testing.T) {
	for _, tt := range []struct{ user, remote, want string }{
		{"", "192.0.2.1:4711", "console from 192.0.2.1"},
		{"alice", "[2001:db8::1]:443", `console user "alice" from 2001:db8::1`},
		{`a"b`, "@", `console user "a\"b"`},
	} {
		if got := By(tt.user, tt.remote); got != tt.want {
			t.Errorf("By(%q, %q) = %s, want %s", tt.user, tt.remote, got, tt.want)
		}
	}
}

func TestMaxRedriveFor(t *testing.T) {
	for _, tt := range []struct {
		configured, senderMax, want int
		err                         string
	}{
		{0, 10000, DefaultRedriveBatch, ""},
		{0, 40, 40, ""},
		{500, 10000, 500, ""},
		{500, 500, 500, ""},
		{501, 500, 0, "max_redrive 501 is over the sender's max_redrive 500, which would refuse such a redrive"},
		{-1, 500, 0, "max_redrive must be positive"},
	} {
		got, err := MaxRedriveFor(tt.configured, tt.senderMax)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
			t.Errorf("MaxRedriveFor(%d, %d) = %d, %v; want %d, %q", tt.configured, tt.senderMax, got, err, tt.want, tt.err)
		}
	}
}
