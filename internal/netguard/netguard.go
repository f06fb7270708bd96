// Package netguard is the SSRF guard of the sender: it keeps requests to a
// URL someone else chose (a customer's endpoint) off the gateway's own
// networks. An address is refused when it is loopback, private,
// link-local, CGNAT, multicast, unspecified or reserved, IPv4 or IPv6; an
// embedding of such an IPv4 address in IPv6 (IPv4-mapped, IPv4-compatible,
// 6to4, Teredo, NAT64); a cloud metadata address; or one of the gateway's
// own listeners. Ranges given to Options.Allow are let through.
//
// Guard.DialContext resolves a host, refuses it when any of its addresses
// is refused, and dials the vetted addresses themselves; the dialer checks
// the address it connects to once more, so a DNS answer that changes
// between the check and the connection cannot slip through.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RefusedError is an address the guard refuses, and the rule that
// refuses it.
type RefusedError struct {
	// Host is the host name or address the URL gave.
	Host string
	// Addr is the address refused.
	Addr netip.Addr
	// Rule names the rule: "loopback", "private", "link-local",
	// "cgnat", "multicast", "unspecified", "reserved", "metadata",
	// "own listener", or an embedding of one ("6to4 of private").
	Rule string
}

func (e *RefusedError) Error() string {
	what := fmt.Sprintf("%s is", e.Addr)
	if e.Host != e.Addr.String() {
		what = fmt.Sprintf("%s resolves to %s,", e.Host, e.Addr)
	}
	switch e.Rule {
	case "own listener":
		return what + " the gateway's own listener: the SSRF guard refuses it"
	case "metadata":
		return what + " a metadata address: the SSRF guard refuses it (allow_networks opens it only by its own /32 or /128)"
	}
	return fmt.Sprintf("%s a %s address: the SSRF guard refuses it (allow_networks opens a range)", what, e.Rule)
}

// rule is a range the guard refuses.
type rule struct {
	prefix netip.Prefix
	name   string
}

func rules(names map[string][]string) []rule {
	var rs []rule
	for name, prefixes := range names {
		for _, p := range prefixes {
			rs = append(rs, rule{netip.MustParsePrefix(p), name})
		}
	}
	// The most specific first: a metadata address is named so, not
	// link-local.
	slices.SortFunc(rs, func(a, b rule) int { return b.prefix.Bits() - a.prefix.Bits() })
	return rs
}

// refused are the ranges refused, by rule (IANA's special-purpose
// registries, RFC 6890 and its updates, and the clouds' metadata
// services).
var refused = rules(map[string][]string{
	"metadata":    {"169.254.169.254/32", "169.254.170.2/32", "168.63.129.16/32", "100.100.100.200/32", "fd00:ec2::254/128"},
	"loopback":    {"127.0.0.0/8", "::1/128"},
	"private":     {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"},
	"link-local":  {"169.254.0.0/16", "fe80::/10"},
	"cgnat":       {"100.64.0.0/10"},
	"multicast":   {"224.0.0.0/4", "ff00::/8"},
	"unspecified": {"0.0.0.0/8", "::/128"},
	"reserved": {
		"192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
		"240.0.0.0/4", // and 255.255.255.255
		"100::/64", "2001:db8::/32", "2001:2::/48", "2001:10::/28", "2001:20::/28", "3fff::/20", "5f00::/16",
		"fec0::/10",      // site-local, deprecated
		"64:ff9b:1::/48", // NAT64 for local use: its embedding is the network's own
		"::/96",          // IPv4-compatible, deprecated (its v4 is checked too)
	},
})

// Resolver looks up a host's addresses: *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Guard.
type Options struct {
	// Allow are the ranges let through, though a rule refuses them
	// (allow_networks): a destination on an internal network, say.
	Allow []netip.Prefix
	// Resolver looks up host names; nil means net.DefaultResolver.
	Resolver Resolver
	// Listeners returns the gateway's own listening addresses; one on
	// an unspecified address stands for every address of the host at
	// its port. Nil means none.
	Listeners func() []netip.AddrPort
	// LocalAddrs returns the host's own addresses, for the listeners on
	// an unspecified address; nil means those of its interfaces.
	LocalAddrs func() []netip.Addr
}

// Guard checks addresses and dials the ones it allows. It is safe for
// concurrent use.
type Guard struct {
	opts   Options
	dialer net.Dialer
}

// New returns a Guard.
func New(opts Options) *Guard {
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.LocalAddrs == nil {
		opts.LocalAddrs = interfaceAddrs
	}
	g := &Guard{opts: opts}
	g.dialer.Control = g.control
	return g
}

// Check refuses addr (to be dialled at port; 0 for any) when a rule
// refuses it; host names it in the error.
func (g *Guard) Check(host string, addr netip.Addr, port uint16) error {
	addr = addr.WithZone("")
	if port != 0 && g.ownListener(addr, port) { // allow_networks does not open these
		return &RefusedError{Host: host, Addr: addr, Rule: "own listener"}
	}
	if name := ruleOf(addr); name != "" && !g.allowed(addr, name) {
		return &RefusedError{Host: host, Addr: addr, Rule: name}
	} else if name != "" {
		return nil
	}
	if v4, how, ok := embedded(addr); ok {
		if name := ruleOf(v4); name != "" && !g.allowed(v4, name) {
			return &RefusedError{Host: host, Addr: addr, Rule: how + " of " + name}
		}
	}
	return nil
}

// allowed reports whether an allowed range lets addr through, though
// rule refuses it. A metadata address is let through only by its own
// range (169.254.169.254/32), never by a wider one that holds it.
func (g *Guard) allowed(addr netip.Addr, rule string) bool {
	addr = addr.Unmap()
	return slices.ContainsFunc(g.opts.Allow, func(p netip.Prefix) bool {
		return p.Contains(addr) && (rule != "metadata" || p.Bits() == addr.BitLen())
	})
}

// ruleOf is the rule that refuses addr, "" for none.
func ruleOf(addr netip.Addr) string {
	if addr.Is4In6() {
		addr = addr.Unmap()
	}
	if addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return "reserved"
	}
	for _, r := range refused {
		if r.prefix.Contains(addr) {
			return r.name
		}
	}
	return ""
}

// embedded is the IPv4 address an IPv6 address carries, and how.
func embedded(addr netip.Addr) (netip.Addr, string, bool) {
	if !addr.Is6() || addr.Is4In6() {
		return netip.Addr{}, "", false
	}
	b := addr.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte(b[i : i+4])) }
	switch {
	case netip.MustParsePrefix("::ffff:0:0:0/96").Contains(addr):
		return v4(12), "IPv4-translated", true
	case netip.MustParsePrefix("::/96").Contains(addr):
		return v4(12), "IPv4-compatible", true
	case netip.MustParsePrefix("64:ff9b::/96").Contains(addr):
		return v4(12), "NAT64", true
	case netip.MustParsePrefix("2002::/16").Contains(addr):
		return v4(2), "6to4", true
	case netip.MustParsePrefix("2001::/32").Contains(addr):
		// Teredo: the client's address, inverted, in the last 32 bits.
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), "Teredo", true
	}
	return netip.Addr{}, "", false
}

// ownListener reports whether addr:port is one of the gateway's own.
func (g *Guard) ownListener(addr netip.Addr, port uint16) bool {
	if g.opts.Listeners == nil {
		return false
	}
	addr = addr.Unmap()
	var local []netip.Addr
	for _, l := range g.opts.Listeners() {
		if l.Port() != port {
			continue
		}
		if l.Addr().Unmap() == addr {
			return true
		}
		if l.Addr().IsUnspecified() {
			if addr.IsLoopback() { // all of 127.0.0.0/8 reaches it
				return true
			}
			if local == nil {
				local = g.opts.LocalAddrs()
			}
			if slices.Contains(local, addr) {
				return true
			}
		}
	}
	return false
}

func interfaceAddrs() []netip.Addr {
	addrs, _ := net.InterfaceAddrs() // none known: the rules above still hold
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// Resolve returns host's addresses at port, each checked: an error (a
// *RefusedError) when any is refused, so that a name that answers a
// public and a private address is refused whichever comes first.
func (g *Guard) Resolve(ctx context.Context, host string, port uint16) ([]netip.AddrPort, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if addrs, err = g.opts.Resolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%s has no address", host)
		}
		for i, a := range addrs {
			addrs[i] = a.Unmap() // an A record, as the resolver may give it
		}
	}
	out := make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		if err := g.Check(host, a, port); err != nil {
			return nil, err
		}
		out = append(out, netip.AddrPortFrom(a.Unmap(), port))
	}
	return out, nil
}

// CheckURL checks rawURL's host as a dial would, for a destination's URL
// at load, create and update, within 2 seconds: a refusal is a
// *RefusedError naming the rule. A name that does not resolve now is not
// refused (each dial checks again), nor a URL without a host (the
// destination's own check says what is wrong with it).
func (g *Guard) CheckURL(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var refused *RefusedError
	if _, err = g.Resolve(ctx, u.Hostname(), portOf(u)); errors.As(err, &refused) {
		return err
	}
	return nil
}

func portOf(u *url.URL) uint16 {
	var port uint16
	if _, err := fmt.Sscan(u.Port(), &port); err == nil {
		return port
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// DialContext dials address (host:port) over network when the guard
// allows every address host resolves to: an http.Transport's DialContext.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, p, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var port uint16
	if _, err := fmt.Sscan(p, &port); err != nil {
		return nil, fmt.Errorf("port %q: %w", p, err)
	}
	addrs, err := g.Resolve(ctx, host, port)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		conn, err := g.dialer.DialContext(ctx, network, a.String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// control checks the address the dialer is about to connect to: the
// last word, whatever resolved it.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: dialling %q: %w", address, err)
	}
	return g.Check(ap.Addr().String(), ap.Addr(), ap.Port())
}

// ParsePrefixes reads CIDR ranges (allow_networks), masked.
func ParsePrefixes(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("%q: want a CIDR range, e.g. 10.20.0.0/16", c)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ListenAddrs reads listen addresses as Caddy writes them
// ([network/]host:port[-port]): those on IP addresses, one per port; a
// listener without a host is on the unspecified address. Unix sockets,
// file descriptors and names are left out: a name's addresses are
// checked as any other's.
func ListenAddrs(listen []string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, l := range listen {
		network, addr, ok := strings.Cut(l, "/")
		if !ok {
			addr, network = network, "tcp"
		}
		if !strings.HasPrefix(network, "tcp") && !strings.HasPrefix(network, "udp") {
			continue
		}
		host, ports, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		ip := netip.IPv6Unspecified()
		if host != "" {
			if ip, err = netip.ParseAddr(host); err != nil {
				continue
			}
		}
		first, last, _ := strings.Cut(ports, "-")
		if last == "" {
			last = first
		}
		lo, err1 := strconv.ParseUint(first, 10, 16)
		hi, err2 := strconv.ParseUint(last, 10, 16)
		for p := lo; err1 == nil && err2 == nil && p <= hi; p++ {
			out = append(out, netip.AddrPortFrom(ip, uint16(p)))
		}
	}
	return out
}
