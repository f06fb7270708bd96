// Package portcheck refuses a TCP address another process listens on.
//
// Caddy listens with SO_REUSEPORT, so that a reload can bind a new
// listener beside the old one. The price: a second process of the same
// user binds the same address without an error, and the kernel splits
// the connections between the two. Check finds such a process before (or
// just after) this one binds.
//
// How: on Linux, /proc/net/tcp and /proc/net/tcp6 list every listening
// socket of this network namespace with its inode, and /proc/self/fd
// links to the inodes of this process's sockets. A listening socket on an
// overlapping address whose inode is not one of ours is another
// process's. Comparing inodes, not trying a bind without SO_REUSEPORT,
// tells our own listeners (Caddy keeps them across reloads) from another
// process's, however many configs this process has loaded. Elsewhere
// Check finds nothing.
package portcheck

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// A Target is an address to be listened on: a host (an IP, a name, or
// empty for every interface) and a port.
type Target struct {
	Host string
	Port uint16
}

// A Conflict is a listener of another process on an address this one
// listens on, or is about to.
type Conflict struct {
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
	return fmt.Sprintf("address %s is already served by another process; hookgate listens with SO_REUSEPORT and would share it silently, "+
		"each process answering some of the connections: stop %s, or give this gateway another port", show(c.Addr), who)
}

// show prints a with an unspecified host as Caddy's ":port".
func show(a netip.AddrPort) string {
	if a.Addr().IsUnspecified() {
		return fmt.Sprintf(":%d", a.Port())
	}
	return a.String()
}

// Check returns a *Conflict for the first of targets, and of the TCP
// addresses this process listens on already (such as Caddy's admin
// endpoint), that another process listens on; nil when there is none.
// A target whose host does not resolve is skipped: binding it fails
// anyway, with its own error.
func Check(ctx context.Context, targets []Target) error {
	s, err := snapshot()
	if err != nil || s == nil {
		return err
	}
	var want []netip.AddrPort
	for _, t := range targets {
		if t.Port == 0 {
			continue // a port the kernel picks is nobody's yet
		}
		for _, ip := range resolve(ctx, t.Host) {
			want = append(want, netip.AddrPortFrom(ip, t.Port))
		}
	}
	for _, l := range s.listeners {
		if s.ours[l.inode] {
			want = append(want, l.addr)
		}
	}
	for _, w := range want {
		if other, ok := s.foreign(w); ok {
			c := &Conflict{Addr: w, Other: other.addr}
			c.PID, c.Command = owner(other.inode)
			return c
		}
	}
	return nil
}

// resolve is host's addresses: the unspecified IPv6 address for an empty
// host (Caddy's ":port" listens on every interface), the IP for an IP,
// else what the resolver answers.
func resolve(ctx context.Context, host string) []netip.Addr {
	host = strings.Trim(host, "[]")
	if host == "" {
		return []netip.Addr{netip.IPv6Unspecified()}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips
}

// A listener is a listening TCP socket.
type listener struct {
	addr  netip.AddrPort // IPv4-mapped addresses unmapped
	inode uint64
}

// A sockets is what the kernel listed: every listening TCP socket of the
// network namespace, and the inodes of this process's sockets.
type sockets struct {
	listeners []listener
	ours      map[uint64]bool
}

// foreign returns a listener of another process whose address overlaps a.
func (s *sockets) foreign(a netip.AddrPort) (listener, bool) {
	for _, l := range s.listeners {
		if !s.ours[l.inode] && overlap(a, l.addr) {
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
