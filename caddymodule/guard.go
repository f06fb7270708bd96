package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/internal/netguard"
)

// guarded reads dc's guard, and checks its URL when the guard is on: a
// URL whose host the guard refuses fails the config, naming the rule.
// A name that does not resolve now is left to the dial, and so are the
// gateway's own listeners (the HTTP app is still loading).
func (a *App) guarded(dc *DestinationConfig) (bool, error) {
	switch dc.Guard {
	case "", "off":
		return false, nil
	case "on":
	default:
		return false, fmt.Errorf("destination %q: guard %q: want on or off", dc.Name, dc.Guard)
	}
	if a.guard == nil {
		allow := make([]netip.Prefix, 0, len(a.AllowNetworks))
		for _, cidr := range a.AllowNetworks {
			p, err := netip.ParsePrefix(cidr)
			if err != nil {
				return false, fmt.Errorf("allow_networks %q: want a CIDR range, e.g. 10.20.0.0/16", cidr)
			}
			allow = append(allow, p.Masked())
		}
		a.guard = netguard.New(netguard.Options{Allow: allow, Listeners: a.listeners})
		a.loadGuard = netguard.New(netguard.Options{Allow: allow})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var refused *netguard.RefusedError
	if err := a.loadGuard.CheckURL(ctx, dc.URL); errors.As(err, &refused) {
		return false, fmt.Errorf("destination %q: url: %w", dc.Name, err)
	}
	return true, nil
}

// listeners are the HTTP servers' addresses: the gateway's own, which a
// guarded destination must not reach.
func (a *App) listeners() []netip.AddrPort {
	v, err := a.ctx.AppIfConfigured("http")
	app, ok := v.(*caddyhttp.App)
	if err != nil || !ok {
		return nil
	}

	var out []netip.AddrPort
	for _, srv := range app.Servers {
		for _, l := range srv.Listen {
			na, err := caddy.ParseNetworkAddress(l)
			if err != nil || na.IsUnixNetwork() || na.IsFdNetwork() {
				continue
			}
			addr := netip.IPv6Unspecified()
			if na.Host != "" {
				if addr, err = netip.ParseAddr(na.Host); err != nil {
					continue // a name: its addresses are checked as any other's
				}
			}
			for p := na.StartPort; p <= na.EndPort && p <= 65535; p++ {
				out = append(out, netip.AddrPortFrom(addr, uint16(p)))
			}
		}
	}
	return out
}
