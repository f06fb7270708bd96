package console

import (
	"crypto/rand"
	"crypto/subtle"
	"net/http"
)

// csrfCookie holds the console's CSRF token: a random value the browser
// keeps, which every form repeats (the double-submit pattern). A page
// from another origin can neither read the cookie nor set the field, and
// Go's cross-origin protection refuses its POSTs before that.
const csrfCookie = "hookgate_console_csrf"

// token is the request's CSRF token; a browser without one gets a new
// one with this answer.
func (c *Console) token(w http.ResponseWriter, r *http.Request, v View) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 16 {
		return ck.Value
	}
	t := rand.Text()
	// Secure follows the connection: over plain HTTP (a console on
	// loopback) a Secure cookie would never come back.
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: t, Path: v.Base + "/", HttpOnly: true, //nolint:gosec // G124: see above
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return t
}

// tokenOK reports a POST whose form repeats its cookie's token.
func (c *Console) tokenOK(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) < 16 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("csrf"))) == 1
}
