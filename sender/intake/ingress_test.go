package intake

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/internal/problem"
)

func checked(t testing.TB, o Options) *Options {
	t.Helper()
	if err := o.Check(); err != nil {
		t.Fatalf("Check(%+v): %v", o, err)
	}
	return &o
}

func TestOptionsCheck(t *testing.T) {
	o := checked(t, Options{KeepHeaders: []string{"x-github-event", "*"}, RedactHeaders: []string{"x-token"}})
	if !o.all || !slices.Equal(o.named, []string{"X-Github-Event"}) || !slices.Equal(o.RedactHeaders, []string{"X-Token"}) {
		t.Errorf("checked: all %v, named %v, redact %v", o.all, o.named, o.RedactHeaders)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{KeepHeaders: []string{"Transfer-Encoding"}}, "never kept"},
		{Options{KeepHeaders: []string{"host"}}, "never kept"},
		{Options{KeepHeaders: []string{"expect"}}, "never kept"},
		{Options{KeepHeaders: []string{"Content-Type"}}, "content type"},
		{Options{KeepHeaders: []string{"Hookgate-Source"}}, "hookgate's own"},
		{Options{KeepHeaders: []string{"X Bad"}}, "not a header name"},
		{Options{RedactHeaders: []string{"*"}}, "names, not *"},
		{Options{AnswerStatus: 500}, "2xx"},
		{Options{AnswerStatus: 302}, "2xx"},
		{Options{AnswerBody: "ok"}, "needs its status"},
		{Options{AnswerStatus: 204, AnswerBody: "ok"}, "no body"},
	} {
		err := c.o.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v, want an error saying %q", c.o, err, c.want)
		}
	}
	var o2 Options
	if err := o2.ParseAnswer([]string{"200", "ok"}); err != nil || o2.AnswerStatus != 200 || o2.AnswerBody != "ok" {
		t.Errorf("ParseAnswer(200 ok) = %+v, %v", o2, err)
	}
	for _, args := range [][]string{nil, {"ok"}, {"200", "a", "b"}} {
		if err := new(Options).ParseAnswer(args); err == nil {
			t.Errorf("ParseAnswer(%q) took it", args)
		}
	}
}

func request(h http.Header) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/github/../x?a=1", nil)
	r.Header = h
	return r
}

func TestReceivedKeeps(t *testing.T) {
	h := http.Header{
		"X-Github-Event":      {"push"},
		"X-Github-Delivery":   {"d-1"},
		"X-Hub-Signature-256": {"sha256=00"},
		"Authorization":       {"Bearer t"},
		"Cookie":              {"c=1"},
		"Connection":          {"keep-alive, X-Hop"},
		"X-Hop":               {"per-connection"},
		"X-Forwarded-For":     {"10.0.0.1"},
		"Traceparent":         {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Expect":              {"100-continue"},
		"Content-Type":        {"application/json"},
		"Hookgate-Redrive-Id": {"forged"},
		"X-Multi":             {"a", "b"},
	}
	creds := []string{"X-Hub-Signature-256"}

	// Nothing asked, no scheme: nothing kept.
	if rec, err := checked(t, Options{}).Received(request(h), "", nil); rec != nil || err != nil {
		t.Errorf("no options = %+v, %v", rec, err)
	}
	// Behind a scheme: its name, no header.
	if rec, err := checked(t, Options{}).Received(request(h), "github", creds); err != nil || rec.Source != "github" || len(rec.Header) != 0 {
		t.Errorf("behind github = %+v, %v", rec, err)
	}
	// Named: those only, a credential too when named; absent ones absent.
	o := checked(t, Options{KeepHeaders: []string{"X-GitHub-Event", "x-hub-signature-256", "X-Absent"}, KeepPath: true, RedactHeaders: []string{"X-Hub-Signature-256", "X-Other"}})
	rec, err := o.Received(request(h), "github", creds)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(rec.Header)); !slices.Equal(got, []string{"X-Github-Event", "X-Hub-Signature-256"}) {
		t.Errorf("named kept %v", got)
	}
	if rec.Path != "/hooks/x?a=1" || !slices.Equal(rec.Redact, []string{"X-Hub-Signature-256"}) {
		t.Errorf("path %q, redact %v", rec.Path, rec.Redact)
	}
	// *: all but the never-kept, the credentials and hookgate's own.
	rec, err = checked(t, Options{KeepHeaders: []string{"*"}}).Received(request(h), "github", creds)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(rec.Header)); !slices.Equal(got, []string{"X-Github-Delivery", "X-Github-Event", "X-Multi"}) {
		t.Errorf("* kept %v", got)
	}
	if !slices.Equal(rec.Header["X-Multi"], []string{"a", "b"}) {
		t.Errorf("X-Multi = %v", rec.Header["X-Multi"])
	}
	// * and names: the named credential and forwarding header too.
	rec, _ = checked(t, Options{KeepHeaders: []string{"*", "Authorization", "X-Forwarded-For"}}).Received(request(h), "github", creds)
	if rec.Header.Get("Authorization") != "Bearer t" || rec.Header.Get("X-Forwarded-For") != "10.0.0.1" ||
		rec.Header.Get("Cookie") != "" || rec.Header.Get("Traceparent") != "" || rec.Header.Get("X-Hop") != "" {
		t.Errorf("* Authorization X-Forwarded-For kept %v", rec.Header)
	}
}

// TestReceivedBounds: 64 header lines and 16 KiB are kept; one more line
// or byte is 431 headers_too_large.
func TestReceivedBounds(t *testing.T) {
	o := checked(t, Options{KeepHeaders: []string{"*"}})
	lines := func(n int) http.Header {
		h := http.Header{}
		for i := range n {
			h.Add(fmt.Sprintf("X-H%02d", i), "v")
		}
		return h
	}
	if _, err := o.Received(request(lines(MaxKeptHeaders)), "", nil); err != nil {
		t.Errorf("%d lines: %v", MaxKeptHeaders, err)
	}
	big := func(extra int) http.Header {
		// One header of exactly MaxKeptHeaderBytes, name and value, plus extra.
		return http.Header{"X-Big": {strings.Repeat("v", MaxKeptHeaderBytes-len("X-Big")+extra)}}
	}
	if _, err := o.Received(request(big(0)), "", nil); err != nil {
		t.Errorf("%d bytes: %v", MaxKeptHeaderBytes, err)
	}
	// The kept path counts in the bytes.
	withPath := checked(t, Options{KeepHeaders: []string{"*"}, KeepPath: true})
	if _, err := withPath.Received(request(big(-5)), "", nil); err == nil {
		t.Errorf("%d bytes of headers and a 12-byte path (/hooks/x?a=1): kept", MaxKeptHeaderBytes-5)
	}
	for name, h := range map[string]http.Header{"lines": lines(MaxKeptHeaders + 1), "bytes": big(1)} {
		_, err := o.Received(request(h), "", nil)
		var ref *Refusal
		if !errors.As(err, &ref) || ref.Reason != problem.HeadersTooLarge {
			t.Errorf("one over in %s: %v, want headers_too_large", name, err)
		}
	}
}

func TestAnswer(t *testing.T) {
	for _, c := range []struct {
		o        Options
		status   int
		body, ct string
		answered bool
	}{
		{Options{}, 0, "", "", false},
		{Options{AnswerStatus: 200}, 200, "", "", true},
		{Options{AnswerStatus: 200, AnswerBody: "ok"}, 200, "ok", "text/plain; charset=utf-8", true},
		{Options{AnswerStatus: 201, AnswerBody: `{"ok":true}`}, 201, `{"ok":true}`, "application/json", true},
		{Options{AnswerStatus: 204}, 204, "", "", true},
	} {
		w := httptest.NewRecorder()
		if got := c.o.answer(w); got != c.answered {
			t.Errorf("answer(%+v) = %v", c.o, got)
			continue
		}
		if !c.answered {
			continue
		}
		if w.Code != c.status || w.Body.String() != c.body || w.Header().Get("Content-Type") != c.ct {
			t.Errorf("answer(%+v) = %d %q %q", c.o, w.Code, w.Body, w.Header().Get("Content-Type"))
		}
	}
}

// FuzzReceived: whatever headers a request carries, keep_headers * keeps
// none of those never kept, no credential, nothing of hookgate's own, and
// stays within the bounds or refuses with 431.
func FuzzReceived(f *testing.F) {
	f.Add("X-Github-Event", "push", 3, "/a/../b?c=d")
	f.Add("authorization", "Bearer x", 70, "//evil/x")
	f.Add("X-Hub-Signature-256", strings.Repeat("a", 400), 50, "/%2e%2e/")
	f.Add("hookgate-redrive-id", "forged", 1, "/")
	o := checked(f, Options{KeepHeaders: []string{"*"}, KeepPath: true})
	f.Fuzz(func(t *testing.T, name, value string, repeat int, target string) {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		if u, err := r.URL.Parse(target); err == nil {
			r.URL = u
		}
		for i := range min(max(repeat, 0), 200) {
			r.Header.Add(name, value)
			r.Header.Add(fmt.Sprintf("X-N%d", i), value)
		}
		rec, err := o.Received(r, "github", []string{"X-Hub-Signature-256"})
		if err != nil {
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Reason != problem.HeadersTooLarge {
				t.Fatalf("error %v", err)
			}
			return
		}
		lines, size := 0, 0
		for k, vs := range rec.Header {
			canon := http.CanonicalHeaderKey(k)
			if slices.Contains(hopByHop, canon) || slices.Contains(credentials, canon) || slices.Contains(unvouched, canon) || canon == "X-Hub-Signature-256" ||
				canon == "Content-Type" || strings.HasPrefix(canon, "Hookgate-") {
				t.Fatalf("kept %q", k)
			}
			lines += len(vs)
			for _, v := range vs {
				size += len(k) + len(v)
			}
		}
		if lines > MaxKeptHeaders || size > MaxKeptHeaderBytes {
			t.Fatalf("kept %d lines, %d bytes", lines, size)
		}
		p, _, _ := strings.Cut(rec.Path, "?") // the query is passed on as it came
		if !strings.HasPrefix(p, "/") || strings.Contains(p+"/", "/../") || strings.HasPrefix(p, "//") {
			t.Fatalf("path %q", rec.Path)
		}
	})
}
