package portal_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/portal"
)

const key = "0123456789abcdef0123456789abcdef"

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newLinks(t *testing.T, k string, c *clock) (*portal.Links, portal.Store) {
	t.Helper()
	s, err := boltstore.New(bolttest.Open(t, nil), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := portal.New(k, "https://hooks.example.com/portal/", s, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return l, s
}

func tokenOf(t *testing.T, link portal.Link) string {
	t.Helper()
	u, err := url.Parse(link.URL)
	if err != nil || u.Host != "hooks.example.com" || u.Path != "/portal/" {
		t.Fatalf("link %q", link.URL)
	}
	return u.Query().Get("token")
}

// TestLinks: a link is good for its tenant until it expires or its
// tenant's links are revoked; one issued after a revocation is good; a
// token changed in any way, or signed under another key, is invalid.
func TestLinks(t *testing.T) {
	c := &clock{time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)}
	l, store := newLinks(t, key, c)
	ctx := t.Context()
	link, err := l.Issue(ctx, "acme", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !link.ExpiresAt.Equal(c.t.Add(2 * time.Hour)) {
		t.Errorf("expires at %s", link.ExpiresAt)
	}
	token := tokenOf(t, link)
	if tenant, exp, err := l.Check(ctx, token); err != nil || tenant != "acme" || !exp.Equal(link.ExpiresAt) {
		t.Fatalf("Check = %q %s %v", tenant, exp, err)
	}
	other, _ := l.Issue(ctx, "globex", 0)

	// Forged: each byte changed, cut short, or under another key.
	for i := range token {
		b := []byte(token)
		b[i] ^= 1
		if _, _, err := l.Check(ctx, string(b)); !errors.Is(err, portal.ErrInvalid) {
			t.Fatalf("byte %d changed: %v", i, err)
		}
	}
	for _, bad := range []string{"", token[:len(token)-1], strings.Split(token, ".")[0], "." + strings.Split(token, ".")[1], token + "." + token, strings.Repeat("a", 600)} {
		if _, _, err := l.Check(ctx, bad); !errors.Is(err, portal.ErrInvalid) {
			t.Errorf("%.40q: %v", bad, err)
		}
	}
	otherKey, _ := portal.New(strings.Repeat("k", 32), "https://hooks.example.com/portal/", store, c.now)
	if _, _, err := otherKey.Check(ctx, token); !errors.Is(err, portal.ErrInvalid) {
		t.Errorf("under another key: %v", err)
	}

	// Revoked: acme's links end, globex's stay; a new one of acme's is good.
	if err := l.Revoke(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Check(ctx, token); !errors.Is(err, portal.ErrRevoked) {
		t.Errorf("revoked: %v", err)
	}
	if tenant, _, err := l.Check(ctx, tokenOf(t, other)); err != nil || tenant != "globex" {
		t.Errorf("globex's after acme's revocation: %q %v", tenant, err)
	}
	again, _ := l.Issue(ctx, "acme", time.Hour)
	if _, _, err := l.Check(ctx, tokenOf(t, again)); err != nil {
		t.Errorf("issued after the revocation: %v", err)
	}
	if _, _, err := l.Check(ctx, token); !errors.Is(err, portal.ErrRevoked) {
		t.Errorf("revoked, after a new issue: %v", err)
	}

	// Expired: at its expiry, not before.
	c.t = again.ExpiresAt.Add(-time.Second)
	if _, _, err := l.Check(ctx, tokenOf(t, again)); err != nil {
		t.Errorf("a second before expiry: %v", err)
	}
	c.t = again.ExpiresAt
	if _, _, err := l.Check(ctx, tokenOf(t, again)); !errors.Is(err, portal.ErrExpired) {
		t.Errorf("at expiry: %v", err)
	}
}

func TestRefused(t *testing.T) {
	c := &clock{time.Now()}
	l, store := newLinks(t, key, c)
	for _, ttl := range []time.Duration{time.Second, 31 * 24 * time.Hour, -time.Hour} {
		if _, err := l.Issue(t.Context(), "acme", ttl); !errors.Is(err, portal.ErrRefused) {
			t.Errorf("ttl %s: %v", ttl, err)
		}
	}
	for _, tenant := range []string{"", "a/b", "-a", strings.Repeat("a", 65)} {
		if _, err := l.Issue(t.Context(), tenant, 0); err == nil {
			t.Errorf("tenant %q issued", tenant)
		}
	}
	if _, err := portal.New("short", "https://x.example/", store, nil); err == nil || strings.Contains(err.Error(), "short") {
		t.Errorf("a short key: %v (must not quote it)", err)
	}
	for _, u := range []string{"/portal/", "ftp://x/", "https://x.example/p?a=1", "https:///p"} {
		if _, err := portal.New(key, u, store, nil); err == nil {
			t.Errorf("portal_url %q accepted", u)
		}
	}
}

// TestOpen: a link's token becomes the session cookie (HttpOnly,
// SameSite=Strict, Secure on https, for the mount path), and the page
// moves on to the same path without it, never off the site; a session
// then names its tenant; no session is ErrNoSession.
func TestOpen(t *testing.T) {
	c := &clock{time.Now()}
	l, _ := newLinks(t, key, c)
	link, _ := l.Issue(t.Context(), "acme", time.Hour)
	token := tokenOf(t, link)

	for _, tc := range []struct{ base, target, next string }{
		{"/portal", "/dead?class=gone&token=" + token, "/portal/dead?class=gone"},
		{"", "//evil.example/?token=" + token, "/evil.example/"},
		{"/portal", "/?token=" + token, "/portal/"},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "https://hooks.example.com"+tc.target, nil)
		tenant, opened, err := l.Open(w, r, tc.base)
		if err != nil || !opened || tenant != "" {
			t.Fatalf("%s: %q %v %v", tc.target, tenant, opened, err)
		}
		body := w.Body.String()
		if !strings.Contains(body, `content="0;url=`+strings.ReplaceAll(tc.next, "&", "&amp;")+`"`) || strings.Contains(body, token) {
			t.Errorf("%s: the page moves on to\n%s\nwant %s", tc.target, body, tc.next)
		}
		if w.Header().Get("Referrer-Policy") != "no-referrer" || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("headers %v", w.Header())
		}
		ck := w.Result().Cookies()
		if len(ck) != 1 || ck[0].Name != portal.Cookie || ck[0].Value != token || !ck[0].HttpOnly || !ck[0].Secure ||
			ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != tc.base+"/" {
			t.Errorf("cookie %+v", ck)
		}
	}

	// Behind a proxy that ends TLS: Secure, as portal_url is https.
	plain := httptest.NewRecorder()
	if _, opened, err := l.Open(plain, httptest.NewRequest("GET", "http://hooks.example.com/?token="+token, nil), ""); !opened || err != nil {
		t.Fatalf("over plain HTTP: %v %v", opened, err)
	}
	if ck := plain.Result().Cookies(); len(ck) != 1 || !ck[0].Secure {
		t.Errorf("the cookie behind a proxy ending TLS: %+v", ck)
	}

	r := httptest.NewRequest("GET", "/dead", nil)
	r.AddCookie(&http.Cookie{Name: portal.Cookie, Value: token})
	if tenant, opened, err := l.Open(httptest.NewRecorder(), r, ""); err != nil || opened || tenant != "acme" {
		t.Errorf("session: %q %v %v", tenant, opened, err)
	}
	if _, _, err := l.Open(httptest.NewRecorder(), httptest.NewRequest("GET", "/dead", nil), ""); !errors.Is(err, portal.ErrNoSession) {
		t.Errorf("no session: %v", err)
	}
	bad := httptest.NewRequest("GET", "/?token=x.y", nil)
	w := httptest.NewRecorder()
	if _, _, err := l.Open(w, bad, ""); !errors.Is(err, portal.ErrInvalid) || len(w.Result().Cookies()) != 0 {
		t.Errorf("a forged link: %v, cookies %v", err, w.Result().Cookies())
	}
	// A POST's token is not a link's: the session decides.
	post := httptest.NewRequest("POST", "/redrive?token="+token, nil)
	if _, opened, err := l.Open(httptest.NewRecorder(), post, ""); opened || !errors.Is(err, portal.ErrNoSession) {
		t.Errorf("a POST with a token: %v %v", opened, err)
	}
}

// FuzzCheck: no input makes Check panic or take a token it did not
// sign.
func FuzzCheck(f *testing.F) {
	c := &clock{time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)}
	s, err := boltstore.New(bolttest.Open(f, nil), boltstore.Options{})
	if err != nil {
		f.Fatal(err)
	}
	l, _ := portal.New(key, "https://hooks.example.com/portal/", s, c.now)
	link, _ := l.Issue(context.Background(), "acme", time.Hour)
	good, _ := url.Parse(link.URL)
	token := good.Query().Get("token")
	f.Add(token)
	f.Add("eyJ0IjoiYWNtZSIsImciOjAsImV4cCI6MX0.AAAA")
	f.Fuzz(func(t *testing.T, in string) {
		tenant, _, err := l.Check(context.Background(), in)
		if err == nil && in != token {
			t.Fatalf("took %q for tenant %q", in, tenant)
		}
	})
}
