// Package adminclient dials a running gateway's admin API at an address as
// Caddy's admin option takes it: host:port, an http:// URL, or a unix
// socket, unix/<path> (unix//run/hookgate/admin.sock), with or without
// Caddy's |<mode> suffix (unix//run/hookgate/admin.sock|0600), which sets
// the socket's mode when the gateway binds it and means nothing to a
// client. The hookgate commands (dlq, destinations, deliveries, store
// backup, reconcile --repair) all speak through it.
package adminclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

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

// New returns the endpoint at addr. timeout bounds each request as
// http.Client's Timeout does; 0 is none.
func New(addr string, timeout time.Duration) (*Endpoint, error) {
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
