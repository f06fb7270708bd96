package portal

import (
	"errors"
	"html/template"
	"net/http"
	"strings"
)

// Cookie is the portal's session cookie: the link's token, HttpOnly and
// SameSite=Strict, for the mount path only.
const Cookie = "hookgate_portal"

// ErrNoSession is a request to the portal with neither a link's token
// nor a session.
var ErrNoSession = errors.New("this page is a customer's portal: open it from the link you were given")

// Open returns the tenant of a request to the portal mounted at base (a
// path without a trailing slash, "" at the root), from its session
// cookie. A GET that carries a link's token (?token=) is answered here:
// the token checked, set as the session cookie, and the browser sent on
// to the same page without it; opened is then true, and the request
// needs nothing more. The error is one of Check's, or ErrNoSession.
//
// The browser moves on through a page that refreshes to the same site
// rather than a redirect: a SameSite=Strict cookie set while following a
// link from another site (an email, a dashboard) is not sent on a
// redirect of that same navigation, and is on a navigation the portal's
// own page makes.
func (l *Links) Open(w http.ResponseWriter, r *http.Request, base string) (tenant string, opened bool, err error) {
	q := r.URL.Query()
	if token := q.Get("token"); token != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		_, exp, err := l.Check(r.Context(), token)
		if err != nil {
			return "", false, err
		}
		// Secure over https, as the connection or portal_url says (a
		// proxy in front may end TLS): over plain HTTP (a portal on
		// loopback) a Secure cookie would never come back.
		http.SetCookie(w, &http.Cookie{Name: Cookie, Value: token, Path: base + "/", Expires: exp, //nolint:gosec // G124: see above
			HttpOnly: true, Secure: r.TLS != nil || l.base.Scheme == "https", SameSite: http.SameSiteStrictMode})
		q.Del("token")
		// One leading slash: "//host" would leave the site.
		next := "/" + strings.TrimLeft(base+r.URL.EscapedPath(), "/")
		if len(q) > 0 {
			next += "?" + q.Encode()
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer") // the token is in this page's URL
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_ = opening.Execute(w, next) // a browser gone away has nothing to be told
		}
		return "", true, nil
	}
	c, err := r.Cookie(Cookie)
	if err != nil || c.Value == "" {
		return "", false, ErrNoSession
	}
	tenant, _, err = l.Check(r.Context(), c.Value)
	return tenant, false, err
}

// opening is the page that moves the browser on to the portal without
// the token.
var opening = template.Must(template.New("opening").Parse(strings.TrimSpace(`
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0;url={{.}}"><title>Opening your portal</title></head>
<body><p>Opening your portal… <a href="{{.}}">continue</a></p></body></html>
`) + "\n"))
