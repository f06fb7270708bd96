package sender_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/verify"
)

// TestReceivedIsSentOn: an envelope received through durable ingress is
// sent with its kept headers (repeats repeated), Hookgate-Received-At and
// Hookgate-Source, to the destination's URL with the kept path and query
// appended; the destination's own headers and its signature win over a
// kept header of the same name, and the signature verifies.
func TestReceivedIsSentOn(t *testing.T) {
	type seen struct {
		uri    string
		header http.Header
		body   []byte
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.RequestURI(), r.Header.Clone(), b}
	}))
	t.Cleanup(srv.Close)
	s, err := sender.New(newQueue(t), fast, []sender.Destination{{
		Name: "svc", URL: srv.URL + "/in?k=v", Signer: signer(t),
		Header: http.Header{"X-Team": {"enroll"}},
	}}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	created := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"action":"opened"}`)
	_, err = s.Enqueue(t.Context(), &sender.Envelope{
		ID: "d-1", Destination: "svc", Payload: body, ContentType: "application/json", CreatedAt: created,
		Received: &sender.Received{
			Source: "github",
			Path:   "/github/../hooks?install=7",
			Header: http.Header{
				"X-Github-Event":    {"issues"},
				"X-Multi":           {"a", "b"},
				"X-Team":            {"from the provider"},
				"Webhook-Signature": {"v1,forged"},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var r seen
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("nothing delivered")
	}
	if r.uri != "/in/hooks?k=v&install=7" {
		t.Errorf("request URI %q, want /in/hooks?k=v&install=7", r.uri)
	}
	if string(r.body) != string(body) {
		t.Errorf("body %q", r.body)
	}
	h := r.header
	for name, want := range map[string]string{
		"X-Github-Event":       "issues",
		"X-Team":               "enroll",
		"Hookgate-Received-At": "2026-12-02T10:00:00Z",
		"Hookgate-Source":      "github",
		"Content-Type":         "application/json",
	} {
		if h.Get(name) != want {
			t.Errorf("%s = %q, want %q", name, h.Get(name), want)
		}
	}
	if m := h.Values("X-Multi"); len(m) != 2 || m[0] != "a" || m[1] != "b" {
		t.Errorf("X-Multi = %q, want [a b]", m)
	}
	if h.Get("Webhook-Signature") == "v1,forged" {
		t.Error("a kept header won over the destination's signature")
	}
	if _, err := signer(t).(*verify.Verifier).Verify(verify.Request{Header: h, Body: r.body}, time.Now()); err != nil {
		t.Errorf("the destination's signature: %v", err)
	}
}

// TestHeaderSentMasksRedacted: the header the console shows for an
// envelope's next attempt holds its kept headers, those redact_headers
// names masked, and the sent one keeps their values.
func TestHeaderSentMasksRedacted(t *testing.T) {
	s, err := sender.New(newQueue(t), fast, []sender.Destination{{Name: "svc", URL: "http://127.0.0.1:1/in", Signer: signer(t)}}, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &sender.Envelope{ID: "d-1", Destination: "svc", Payload: []byte(`{}`), CreatedAt: time.Now(),
		Received: &sender.Received{Source: "github", Header: http.Header{"X-Token": {"s3cret"}, "X-Github-Event": {"push"}}, Redact: []string{"X-Token"}}}
	h, err := s.HeaderSent(e)
	if err != nil {
		t.Fatal(err)
	}
	if h.Get("X-Token") != sender.Redacted || h.Get("X-Github-Event") != "push" || h.Get("Hookgate-Source") != "github" {
		t.Errorf("HeaderSent = %v", h)
	}
	if e.Received.Header.Get("X-Token") != "s3cret" {
		t.Error("HeaderSent changed the envelope's kept header")
	}
}
