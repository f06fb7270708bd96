package console

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

var onceField = regexp.MustCompile(`name="once" value="([^"]+)"`)

// previewToken posts form as a redrive preview and returns the one-time
// token of the confirm form it answers.
func previewToken(t *testing.T, c *Console, v View, form url.Values) string {
	t.Helper()
	w := request(c, v, "POST", "/redrive", maps.Clone(form))
	m := onceField.FindStringSubmatch(w.Body.String())
	if w.Code != 200 || m == nil {
		t.Fatalf("preview %v: %d, no one-time token:\n%s", form, w.Code, w.Body.String())
	}
	return m[1]
}

// confirmForm is the confirm form a preview of dest and limit answers.
func confirmForm(t *testing.T, c *Console, v View, dest, limit string) url.Values {
	t.Helper()
	form := url.Values{"destination": {dest}, "limit": {limit}}
	form.Set("once", previewToken(t, c, v, form))
	form.Set("confirm", "yes")
	return form
}

// TestConfirmPostedTwiceMovesOneBatch: the second post of a confirm form
// moves nothing and is sent to the first one's outcome, which says so.
func TestConfirmPostedTwiceMovesOneBatch(t *testing.T) {
	f := newFake()
	c := newConsole(t, f)
	v := View{Base: "/c"}
	form := confirmForm(t, c, v, "b", "2")
	w := request(c, v, "POST", "/redrive", maps.Clone(form))
	if w.Code != 303 || w.Header().Get("Location") != "/c/redrives/rd_1" {
		t.Fatalf("first post: %d %q\n%s", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	for range 2 {
		w = request(c, v, "POST", "/redrive", maps.Clone(form))
		if w.Code != 303 || w.Header().Get("Location") != "/c/redrives/rd_1?resubmitted=1" {
			t.Fatalf("the same form again: %d %q\n%s", w.Code, w.Header().Get("Location"), w.Body.String())
		}
	}
	if n := f.redrives(); n != 1 {
		t.Fatalf("one confirm form posted three times made %d redrives, want 1", n)
	}
	w = request(c, v, "GET", "/redrives/rd_1?resubmitted=1", nil)
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, `id="resubmitted"`) || !strings.Contains(body, `id="redrive-id">rd_1<`) {
		t.Fatalf("the outcome of a resubmitted form: %d\n%s", w.Code, body)
	}
	if w := request(c, v, "GET", "/redrives/rd_1", nil); strings.Contains(w.Body.String(), `id="resubmitted"`) {
		t.Fatal("the first post's outcome says it was sent before")
	}
	// A new preview is a new decision: its form moves a new batch.
	if w := request(c, v, "POST", "/redrive", confirmForm(t, c, v, "b", "2")); w.Code != 303 || w.Header().Get("Location") != "/c/redrives/rd_2" || f.redrives() != 2 {
		t.Fatalf("a new preview's confirm: %d %q, %d redrives", w.Code, w.Header().Get("Location"), f.redrives())
	}
}

// TestConfirmPostedTwiceAtOnce: a second post while the first is still
// redriving waits for it and is sent to its outcome; one batch moves.
func TestConfirmPostedTwiceAtOnce(t *testing.T) {
	f := newFake()
	started, release := make(chan struct{}), make(chan struct{})
	f.onRedrive = func(ctx context.Context, n int) (*sender.Redrive, error) {
		if n == 1 {
			close(started)
			<-release
		}
		return &sender.Redrive{ID: "rd_slow", Moved: 2}, nil
	}
	c := newConsole(t, f)
	form := confirmForm(t, c, View{}, "b", "2")
	var wg sync.WaitGroup
	locations := make([]string, 2)
	wg.Go(func() {
		w := request(c, View{}, "POST", "/redrive", maps.Clone(form))
		locations[0] = w.Header().Get("Location")
	})
	<-started
	second := make(chan struct{})
	wg.Go(func() {
		defer close(second)
		w := request(c, View{}, "POST", "/redrive", maps.Clone(form))
		locations[1] = w.Header().Get("Location")
	})
	select {
	case <-second:
		t.Fatalf("the second post answered while the first was still redriving: %q", locations[1])
	case <-time.After(5 * confirmPoll):
	}
	close(release)
	wg.Wait()
	if locations[0] != "/redrives/rd_slow" || locations[1] != "/redrives/rd_slow?resubmitted=1" || f.redrives() != 1 {
		t.Fatalf("two posts at once: %q, %d redrives; want the one redrive's outcome twice", locations, f.redrives())
	}
}

// TestConfirmStillRedriving: a post that waits past the bound for
// another post of its form to finish is told so, and moves nothing.
func TestConfirmStillRedriving(t *testing.T) {
	f := newFake()
	started, release := make(chan struct{}), make(chan struct{})
	f.onRedrive = func(ctx context.Context, n int) (*sender.Redrive, error) {
		if n == 1 {
			close(started)
			<-release
		}
		return &sender.Redrive{ID: "rd_slow", Moved: 2}, nil
	}
	c := newConsole(t, f)
	c.confirmWait = 3 * confirmPoll
	form := confirmForm(t, c, View{}, "b", "2")
	done := make(chan struct{})
	go func() {
		defer close(done)
		request(c, View{}, "POST", "/redrive", maps.Clone(form))
	}()
	<-started
	w := request(c, View{}, "POST", "/redrive", maps.Clone(form))
	close(release)
	<-done
	if w.Code != 409 || !strings.Contains(w.Body.String(), "redrive_in_progress") || w.Header().Get("Retry-After") == "" || f.redrives() != 1 {
		t.Fatalf("a post while its form's redrive runs on: %d Retry-After %q, %d redrives\n%s", w.Code, w.Header().Get("Retry-After"), f.redrives(), w.Body.String())
	}
}

// TestConfirmTokenRefused: a confirm form whose token is missing,
// unknown, expired, or bound to another filter, limit, browser or scope
// gets a page that says so, and nothing moves; the refusals do not spend
// the token.
func TestConfirmTokenRefused(t *testing.T) {
	f := newFake()
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	c := New(f, onceStore(t, t.TempDir()), clock)
	form := confirmForm(t, c, View{}, "b", "2")
	with := func(k, v string) url.Values {
		g := maps.Clone(form)
		g.Set(k, v)
		return g
	}
	for _, tt := range []struct {
		name   string
		v      View
		form   url.Values
		csrf   string
		status int
		reason string
	}{
		{"no token", View{}, with("once", ""), csrfToken, 400, "confirm_token_missing"},
		{"unknown token", View{}, with("once", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ"), csrfToken, 409, "confirm_token_stale"},
		{"another limit", View{}, with("limit", "3"), csrfToken, 409, "confirm_token_mismatch"},
		{"another destination", View{}, with("destination", "a"), csrfToken, 409, "confirm_token_mismatch"},
		{"another class", View{}, with("class", "http_5xx"), csrfToken, 409, "confirm_token_mismatch"},
		{"another since", View{}, with("since", "2026-01-01T00:00:00Z"), csrfToken, 409, "confirm_token_mismatch"},
		{"another browser", View{}, with("csrf", "OTHERBROWSEROTHERBROWSER12"), "OTHERBROWSEROTHERBROWSER12", 409, "confirm_token_mismatch"},
		{"another scope", View{Scope: sender.Scope{Destination: "b"}}, form, csrfToken, 409, "confirm_token_mismatch"},
	} {
		w := send(context.Background(), c, tt.v, "POST", "/redrive", maps.Clone(tt.form), tt.csrf)
		if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.reason) || !strings.Contains(w.Body.String(), "nothing moved") {
			t.Errorf("%s: %d, want %d %s:\n%s", tt.name, w.Code, tt.status, tt.reason, w.Body.String())
		}
	}
	if n := f.redrives(); n != 0 {
		t.Fatalf("refused confirm forms made %d redrives", n)
	}
	if w := request(c, View{}, "POST", "/redrive", maps.Clone(form)); w.Code != 303 || f.redrives() != 1 {
		t.Fatalf("the form itself after the refusals: %d, %d redrives", w.Code, f.redrives())
	}

	// A preview is good for ConfirmTTL.
	late := confirmForm(t, c, View{}, "b", "2")
	mu.Lock()
	now = now.Add(ConfirmTTL + time.Second)
	mu.Unlock()
	if w := request(c, View{}, "POST", "/redrive", late); w.Code != 409 || !strings.Contains(w.Body.String(), "confirm_token_stale") || f.redrives() != 1 {
		t.Fatalf("an expired confirm form: %d, %d redrives:\n%s", w.Code, f.redrives(), w.Body.String())
	}
}

// TestConfirmAfterFailure: a confirm whose redrive moved nothing before
// the store failed can be posted again; one that moved some is sent to
// that redrive's outcome when posted again, never redriven twice.
func TestConfirmAfterFailure(t *testing.T) {
	f := newFake()
	down := errors.New("store down")
	f.onRedrive = func(ctx context.Context, n int) (*sender.Redrive, error) {
		switch n {
		case 1:
			return &sender.Redrive{Matched: 3}, down // nothing moved
		case 2:
			return &sender.Redrive{ID: "rd_2", Moved: 2}, nil
		case 3:
			return &sender.Redrive{ID: "rd_3", Moved: 1}, down // part moved
		}
		t.Fatalf("redrive %d", n)
		return nil, nil
	}
	c := newConsole(t, f)
	form := confirmForm(t, c, View{}, "b", "2")
	if w := request(c, View{}, "POST", "/redrive", maps.Clone(form)); w.Code != 503 || !strings.Contains(w.Body.String(), "store_unavailable") {
		t.Fatalf("store down: %d\n%s", w.Code, w.Body.String())
	}
	if w := request(c, View{}, "POST", "/redrive", maps.Clone(form)); w.Code != 303 || w.Header().Get("Location") != "/redrives/rd_2" {
		t.Fatalf("the same form once the store is back: %d %q", w.Code, w.Header().Get("Location"))
	}

	form = confirmForm(t, c, View{}, "b", "2")
	if w := request(c, View{}, "POST", "/redrive", maps.Clone(form)); w.Code != 503 || !strings.Contains(w.Body.String(), "redrive_incomplete") {
		t.Fatalf("a redrive that failed part-way: %d\n%s", w.Code, w.Body.String())
	}
	if w := request(c, View{}, "POST", "/redrive", maps.Clone(form)); w.Code != 303 || w.Header().Get("Location") != "/redrives/rd_3?resubmitted=1" || f.redrives() != 3 {
		t.Fatalf("the same form after a partial redrive: %d %q, %d redrives", w.Code, w.Header().Get("Location"), f.redrives())
	}
}

// TestRedriveOutlivesTheClient: a confirmed redrive or a replay whose
// client has gone (a double click cancels the first post) still runs,
// and the form posted again shows it.
func TestRedriveOutlivesTheClient(t *testing.T) {
	f := newFake()
	var ran atomic.Int32
	f.onRedrive = func(ctx context.Context, n int) (*sender.Redrive, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ran.Add(1)
		return &sender.Redrive{ID: "rd_x", Moved: 1}, nil
	}
	c := newConsole(t, f)
	form := confirmForm(t, c, View{}, "b", "2")
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	send(gone, c, View{}, "POST", "/redrive", maps.Clone(form), csrfToken)
	send(gone, c, View{}, "POST", "/dead/1/replay", url.Values{"destination": {"b"}}, csrfToken)
	if w := request(c, View{}, "POST", "/redrive", maps.Clone(form)); w.Code != 303 || w.Header().Get("Location") != "/redrives/rd_x?resubmitted=1" {
		t.Fatalf("the form again after its first post's client left: %d %q\n%s", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	if n := ran.Load(); n != 2 {
		t.Fatalf("%d redrives ran to their end, want the redrive and the replay", n)
	}
}
