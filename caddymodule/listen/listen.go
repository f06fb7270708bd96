// Package listen reads the addresses the Caddy http app's servers listen
// on: the targets portcheck checks for another process, and the
// listeners the SSRF guard keeps guarded destinations away from.
package listen

import (
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/internal/netguard"
	"github.com/hookgate/hookgate/internal/portcheck"
)

// Targets are the addresses app's servers listen on: TCP, and UDP
// where a server serves HTTP/3. A unix socket has no port, and an
// address that does not parse is the http app's to report.
func Targets(app *caddyhttp.App) []portcheck.Target {
	var targets []portcheck.Target
	for _, srv := range app.Servers {
		for i, l := range srv.Listen {
			na, err := caddy.ParseNetworkAddress(l)
			if err != nil || !strings.HasPrefix(na.Network, "tcp") {
				continue
			}
			for p := na.StartPort; p <= na.EndPort && p <= math.MaxUint16; p++ {
				targets = append(targets, portcheck.Target{Network: na.Network, Host: na.Host, Port: uint16(p)})
				if servesHTTP3(app, srv, i, p) {
					targets = append(targets, portcheck.Target{Network: "udp" + strings.TrimPrefix(na.Network, "tcp"), Host: na.Host, Port: uint16(p)})
				}
			}
		}
	}
	return targets
}

// servesHTTP3 reports whether the http app listens on UDP for HTTP/3 at
// port of srv's listen address i, as its Start decides: h3 among the
// address's protocols (the server's, which the http app's Provision
// defaults to h1 h2 h3), and TLS on that port (a connection policy, and
// not the HTTP port).
func servesHTTP3(app *caddyhttp.App, srv *caddyhttp.Server, i int, port uint) bool {
	protocols := srv.Protocols
	if i < len(srv.ListenProtocols) && srv.ListenProtocols[i] != nil {
		protocols = srv.ListenProtocols[i]
	}
	httpPort := app.HTTPPort
	if httpPort == 0 {
		httpPort = caddyhttp.DefaultHTTPPort
	}
	return slices.Contains(protocols, "h3") && len(srv.TLSConnPolicies) > 0 && int(port) != httpPort
}

// Addrs are app's listen addresses, as the guard compares them.
func Addrs(app *caddyhttp.App) []netip.AddrPort {
	var listen []string
	for _, srv := range app.Servers {
		listen = append(listen, srv.Listen...)
	}
	return netguard.ListenAddrs(listen)
}
