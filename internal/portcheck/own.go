package portcheck

import (
	"net/netip"
	"sync"
	"time"
)

// ownTTL is how long Own's answer is reused: it reads the proc file
// system, and the SSRF guard asks at every dial.
const ownTTL = time.Second

var own struct {
	sync.Mutex
	at    time.Time
	addrs []netip.AddrPort
}

// Own is the addresses this process listens on over TCP, whatever
// opened them: the HTTP servers, Caddy's admin endpoint, a metrics
// server. Read at most once a second; nil where the proc file system
// cannot be read (then the caller's own list is all it has).
func Own() []netip.AddrPort {
	own.Lock()
	defer own.Unlock()
	if time.Since(own.at) < ownTTL {
		return own.addrs
	}
	own.at, own.addrs = time.Now(), nil
	s, err := snapshot("/proc")
	if err != nil || s == nil {
		return nil
	}
	for _, l := range s.listeners {
		if !l.udp && s.ours[l.inode] {
			own.addrs = append(own.addrs, l.addr)
		}
	}
	return own.addrs
}
