package console

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

// confine narrows f to v's scope: its one destination, or its tenant's
// (where a destination f names outside it matches nothing: the sender
// refuses it as unknown).
func (v View) confine(f sender.Filter) sender.Filter {
	switch {
	case v.Scope.Destination != "":
		f.Destination = v.Scope.Destination
	case v.Scope.Tenant != "":
		f.Tenant = v.Scope.Tenant
	}
	return f
}

// destination is the destination a request names (a query's or a form's
// destination), within v's scope: a scoped console's one, or, in a
// tenant's, the one named when it is the tenant's; one outside is 404,
// as one that does not exist.
func (v View) destination(named string) (string, error) {
	switch {
	case v.Scope.Destination != "":
		return v.Scope.Destination, nil
	case !v.Scope.Sees(named):
		return "", refuse(problem.NotFound, "no such destination")
	}
	return named, nil
}

// What the handler that mounts the console (webhook_console) works out
// for it: the View of a request, and its MaxRedrive.

// MountBase is View.Base: the prefix stripped from a request's path before
// the console saw it (Caddy's handle_path), given the escaped path as the
// request arrived and the escaped path left. Both are cleaned as Caddy's
// matchers clean them. It always starts with exactly one slash, or is ""
// (the root, or no prefix found): links and redirects built on it never
// leave the host.
func MountBase(orig, rest string) string {
	clean := func(p string) string { return strings.TrimSuffix(path.Clean("/"+p), "/") }
	base, found := strings.CutSuffix(clean(orig), clean(rest))
	if !found || strings.HasPrefix(base, "//") || (base != "" && base[0] != '/') {
		return ""
	}
	return base
}

// ClientChosen reports whether a scope, a Caddy placeholder template,
// takes its value from what the client sets: a header, the query, a
// cookie or the path. Such a scope lets anyone name any destination.
func ClientChosen(scope string) bool {
	for _, prefix := range []string{"{http.request.header.", "{http.request.uri", "{http.request.cookie.", "{query.", "{header.", "{cookie.", "{path", "{http.request.orig_uri"} {
		if strings.Contains(scope, prefix) {
			return true
		}
	}
	return false
}

// By is View.By for a request from remoteAddr by user (the authenticated
// user's ID, "" when none): `console user "alice" from 192.0.2.1`.
func By(user, remoteAddr string) string {
	by := "console"
	if user != "" {
		by += " user " + strconv.Quote(user)
	}
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		by += " from " + host
	}
	return by
}

// MaxRedriveFor is Console.MaxRedrive as configured (0: unset) under a
// sender whose own bound is senderMax: by default DefaultRedriveBatch, or
// senderMax when lower. The sender refuses a redrive over its bound, so
// the page must not offer one: a configured value over it is an error.
func MaxRedriveFor(configured, senderMax int) (int, error) {
	switch {
	case configured < 0:
		return 0, fmt.Errorf("max_redrive must be positive")
	case configured == 0:
		return min(DefaultRedriveBatch, senderMax), nil
	case configured > senderMax:
		return 0, fmt.Errorf("max_redrive %d is over the sender's max_redrive %d, which would refuse such a redrive", configured, senderMax)
	}
	return configured, nil
}
