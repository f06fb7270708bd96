package caddymodule

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/caddymodule/listen"
	"github.com/hookgate/hookgate/internal/netguard"
	"github.com/hookgate/hookgate/internal/portcheck"
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
	if err := a.loadGuard.CheckURL(context.Background(), dc.URL); err != nil {
		return false, fmt.Errorf("destination %q: url: %w", dc.Name, err)
	}
	return true, nil
}

// makeGuard makes the SSRF guard once: the one every dial of a guarded
// destination goes through, and the one that checks URLs at load.
func (a *App) makeGuard() error {
	if a.guard != nil {
		return nil
	}
	allow, err := netguard.ParsePrefixes(a.AllowNetworks)
	if err != nil {
		return fmt.Errorf("allow_networks: %w", err)
	}
	a.guard = netguard.New(netguard.Options{Allow: allow, Listeners: a.listeners})
	a.loadGuard = netguard.New(netguard.Options{Allow: allow})
	return nil
}

// listeners are the gateway's own addresses, which a guarded destination
// must not reach: every TCP socket this process listens on (its admin
// endpoint among them), and the HTTP servers' configured addresses.
func (a *App) listeners() []netip.AddrPort {
	own := portcheck.Own() // the admin endpoint too, and any other socket of this process
	if v, _ := a.ctx.AppIfConfigured("http"); v != nil {
		own = append(own, listen.Addrs(v.(*caddyhttp.App))...)
	}
	return own
}
