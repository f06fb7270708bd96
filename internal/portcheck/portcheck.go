// Package portcheck refuses a TCP or UDP address another process listens
// on.
//
// Caddy listens with SO_REUSEPORT, so that a reload can bind a new
// listener beside the old one: its TCP listeners, and the UDP sockets of
// HTTP/3. The price: a second process of the same user binds the same
// address without an error, and the kernel splits the connections (or
// the datagrams) between the two. Check finds such a process before (or
// just after) this one binds.
//
// How: on Linux, /proc/net/tcp, tcp6, udp and udp6 list every socket of
// this network namespace with its inode, and /proc/self/fd links to the
// inodes of this process's sockets. A listening socket (a bound,
// unconnected one for UDP) on an overlapping address whose inode is not
// one of ours is another process's. Comparing inodes, not trying a bind
// without SO_REUSEPORT, tells our own listeners (Caddy keeps them across
// reloads) from another process's, however many configs this process has
// loaded. Elsewhere Check finds nothing. When /proc cannot be read (a
// chroot without it), Check says so with ErrUnchecked: the caller warns
// and goes on, since a safety check that cannot run must not stop the
// service.
package portcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// ErrUnchecked is wrapped by Check's error when it could not read what it
// needs (/proc): nothing is known of other processes' listeners.
var ErrUnchecked = errors.New("cannot tell whether another process listens on the gateway's addresses")

// A Target is an address to be listened on: a network as Go's net.Listen
// and ListenPacket name them ("tcp", "tcp4", "tcp6", "udp", "udp4",
// "udp6"; "" is "tcp"), a host (an IP, a name, or empty for every
// interface) and a port.
type Target struct {
	Network string
	Host    string
	Port    uint16
}

// udp reports whether the target is a UDP address.
func (t Target) udp() bool { return strings.HasPrefix(t.Network, "udp") }

// A Conflict is a listener of another process on an address this one
// listens on, or is about to.
type Conflict struct {
	Network string         // "tcp" or "udp"
	Addr    netip.AddrPort // the address asked for
	Other   netip.AddrPort // the other process's listener
	PID     int            // the other process, 0 if unknown
	Command string         // its command name, "" if unknown
}

func (c *Conflict) Error() string {
	who := "the other process"
	if c.PID > 0 {
		who = fmt.Sprintf("the other process (pid %d", c.PID)
		if c.Command != "" {
			who += ", " + c.Command
		}
		who += ")"
	}
	return fmt.Sprintf("%s address %s is already served by another process; hookgate listens with SO_REUSEPORT and would share it silently, "+
		"each process answering some of the connections: stop %s, or give this gateway another port", strings.ToUpper(c.Network), show(c.Addr), who)
}

// show prints a with an unspecified host as Caddy's ":port".
func show(a netip.AddrPort) string {
	if a.Addr().IsUnspecified() {
		return fmt.Sprintf(":%d", a.Port())
	}
	return a.String()
}

// Check returns a *Conflict for the first of targets, and of the TCP and
// UDP addresses this process listens on already (such as Caddy's admin
// endpoint), that another process listens on; nil when there is none; an
// error wrapping ErrUnchecked when /proc cannot be read. A host name is
// checked on the one address Go binds for it, as net.Listen picks it; a
// target whose host does not resolve is skipped: binding it fails
// anyway, with its own error.
func Check(ctx context.Context, targets []Target) error {
	return checker{proc: "/proc", lookup: lookupNetIP}.check(ctx, targets)
}

// lookupNetIP is host's addresses, in the order Go's net.Listen gets them.
func lookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// A checker checks targets against the sockets that the proc file
// system mounted at proc lists, resolving host names with lookup.
type checker struct {
	proc   string
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

func (c checker) check(ctx context.Context, targets []Target) error {
	s, err := snapshot(c.proc)
	if err != nil {
		return fmt.Errorf("%w: reading %s: %w", ErrUnchecked, c.proc, err)
	}
	if s == nil {
		return nil
	}
	var want []listener
	for _, t := range targets {
		if t.Port == 0 {
			continue // a port the kernel picks is nobody's yet
		}
		if ip, ok := c.bound(ctx, t.Network, t.Host); ok {
			want = append(want, listener{udp: t.udp(), addr: netip.AddrPortFrom(ip, t.Port)})
		}
	}
	for _, l := range s.listeners {
		if s.ours[l.inode] {
			want = append(want, l)
		}
	}
	for _, w := range want {
		if other, ok := s.foreign(w); ok {
			conflict := &Conflict{Network: "tcp", Addr: w.addr, Other: other.addr}
			if w.udp {
				conflict.Network = "udp"
			}
			conflict.PID, conflict.Command = owner(c.proc, other.inode)
			return conflict
		}
	}
	return nil
}

// bound is the address Go's net.Listen (or ListenPacket) binds for host
// on network: for an empty host, the unspecified address (IPv4's on a
// "4" network, else IPv6's: a dual-stack socket); for an IP, the IP; for a
// name, the first IPv4 address it resolves to, else its first address,
// of the network's family if the network names one. false when the name
// does not resolve.
func (c checker) bound(ctx context.Context, network, host string) (netip.Addr, bool) {
	host = strings.Trim(host, "[]")
	var family string // "4", "6", or another: either
	if n := len(network); n > 0 {
		family = network[n-1:]
	}
	if host == "" {
		if family == "4" {
			return netip.IPv4Unspecified(), true
		}
		return netip.IPv6Unspecified(), true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap(), true
	}
	ips, err := c.lookup(ctx, host)
	if err != nil {
		return netip.Addr{}, false
	}
	var first netip.Addr
	for _, ip := range ips {
		ip = ip.Unmap()
		if (family == "4" && !ip.Is4()) || (family == "6" && !ip.Is6()) {
			continue
		}
		if ip.Is4() {
			return ip, true
		}
		if !first.IsValid() {
			first = ip
		}
	}
	return first, first.IsValid()
}

// A listener is a listening TCP socket, or a bound, unconnected UDP one.
type listener struct {
	udp   bool
	addr  netip.AddrPort // IPv4-mapped addresses unmapped
	inode uint64
}

// A sockets is what the kernel listed: every listening TCP and UDP socket
// of the network namespace, and the inodes of this process's sockets.
type sockets struct {
	listeners []listener
	ours      map[uint64]bool
}

// foreign returns a listener of another process, of w's protocol, whose
// address overlaps w's.
func (s *sockets) foreign(w listener) (listener, bool) {
	for _, l := range s.listeners {
		if !s.ours[l.inode] && l.udp == w.udp && overlap(w.addr, l.addr) {
			return l, true
		}
	}
	return listener{}, false
}

// overlap reports whether connections to a and to b can reach the same
// listener's port: the same port, and the same IP, or one of them listens
// on every interface (the IPv6 wildcard on both families, as a dual-stack
// socket does; the IPv4 wildcard on IPv4 only).
func overlap(a, b netip.AddrPort) bool {
	if a.Port() != b.Port() {
		return false
	}
	x, y := a.Addr().Unmap(), b.Addr().Unmap()
	switch {
	case x == y:
		return true
	case x == netip.IPv6Unspecified() || y == netip.IPv6Unspecified():
		return true
	case x == netip.IPv4Unspecified():
		return y.Is4()
	case y == netip.IPv4Unspecified():
		return x.Is4()
	}
	return false
}
