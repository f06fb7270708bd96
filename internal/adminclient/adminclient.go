// Package adminclient dials a running gateway's admin API at an address as
// Caddy's admin option takes it: host:port, an http:// URL, or a unix
// socket, unix/<path> (unix//run/hookgate/admin.sock), with or without
// Caddy's |<mode> suffix (unix//run/hookgate/admin.sock|0600), which sets
// the socket's mode when the gateway binds it and means nothing to a
// client. The hookgate commands (dlq, destinations, deliveries, dedupe,
// freshness, store backup, reconcile --repair) all speak through it: Call
// for a JSON request and answer, Do and ErrorOf for a streamed one. A
// refusal, problem+json or not, is an *Error with its status and reason.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
)

// DefaultAddress is the admin endpoint when none is named: CADDY_ADMIN,
// else localhost:2019, as Caddy's own default.
func DefaultAddress() string {
	if addr := os.Getenv("CADDY_ADMIN"); addr != "" {
		return addr
	}
	return "localhost:2019"
}

// errAddress is the error of an address that names no admin endpoint.
var errAddress = errors.New("--address: want host:port, an http:// URL, or unix//path/to/admin.sock")

// An Endpoint is an admin API to send requests to.
type Endpoint struct {
	// Base is the URL every request path is joined to: for a unix
	// socket, http://127.0.0.1, the Host Caddy's admin accepts there.
	Base *url.URL
	// Client dials the address, whatever Base's host says.
	Client *http.Client
	// Name is the address as errors name it: scheme://host:port, or
	// unix/<path> without the mode.
	Name string
}

// New returns the endpoint at addr ("": DefaultAddress). timeout bounds
// each request as http.Client's Timeout does, the answer's body read
// included; 0 is none.
func New(addr string, timeout time.Duration) (*Endpoint, error) {
	if addr == "" {
		addr = DefaultAddress()
	}
	if rest, ok := strings.CutPrefix(addr, "unix/"); ok {
		path, _, _ := strings.Cut(rest, "|")
		if path == "" {
			return nil, errAddress
		}
		var d net.Dialer
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		}}
		return &Endpoint{
			Base:   &url.URL{Scheme: "http", Host: "127.0.0.1"},
			Client: &http.Client{Transport: tr, Timeout: timeout},
			Name:   "unix/" + path,
		}, nil
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(strings.TrimSuffix(addr, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, errAddress
	}
	return &Endpoint{Base: u, Client: &http.Client{Timeout: timeout}, Name: u.Scheme + "://" + u.Host}, nil
}

// URL is the endpoint's URL for path (which may carry a query).
func (e *Endpoint) URL(path string) string {
	return e.Base.String() + path
}

// Do sends req. An error that reaches no answer asks whether the gateway
// runs there, and names the endpoint, not the request's URL (for a unix
// socket, Base's host is a stand-in).
func (e *Endpoint) Do(req *http.Request) (*http.Response, error) {
	resp, err := e.Client.Do(req) //nolint:gosec // G704: the address is the operator's own --address or CADDY_ADMIN
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("is the gateway running with its admin API on %s? %w", e.Name, err)
	}
	return resp, nil
}

// maxAnswer bounds the answer Call reads.
const maxAnswer = 64 << 20

// Call sends method path (which may carry a query) with body as JSON (nil:
// none), and returns the answer's body. An answer of 300 or more is an
// *Error; one that is no answer at all, an error from Do.
func (e *Endpoint) Call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL(path), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }() // read below
	if err := ErrorOf(resp); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return b, nil
}

// Error is a refusal of the admin API: its status, and from a
// problem+json answer, its reason code and detail; from another answer,
// its body.
type Error struct {
	Status int
	Reason string
	Detail string
	Body   string
}

// Error reads "<detail> (<status> <reason>)", or "<status> <text>: <body>"
// for an answer that is no problem.
func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%s (%d %s)", e.Detail, e.Status, e.Reason)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Body)
}

// ErrorOf is nil for an answer under 300, else the *Error it holds; it
// reads the refusal's body (64 KiB at most), which the caller still closes.
func ErrorOf(resp *http.Response) error {
	if resp.StatusCode < 300 {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10)) // a refusal cut short is still one
	var p problem.Details
	if json.Unmarshal(b, &p) == nil && p.Detail != "" {
		return &Error{Status: resp.StatusCode, Reason: p.Reason, Detail: p.Detail}
	}
	return &Error{Status: resp.StatusCode, Reason: p.Reason, Body: strings.TrimSpace(string(b))}
}
