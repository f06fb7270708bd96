package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// TestRules: an address in every refused range, IPv4 and IPv6 and their
// embeddings, is refused by its rule; public addresses pass.
func TestRules(t *testing.T) {
	g := New(Options{})
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "127.255.0.9": "loopback", "::1": "loopback",
		"10.1.2.3": "private", "172.16.0.1": "private", "172.31.255.255": "private", "192.168.1.1": "private", "fd12::1": "private", "fc00::1": "private",
		"169.254.1.1": "link-local", "fe80::1": "link-local",
		"100.64.0.1": "cgnat", "100.127.255.254": "cgnat",
		"224.0.0.1": "multicast", "239.1.1.1": "multicast", "ff02::1": "multicast",
		"0.0.0.0": "unspecified", "0.1.2.3": "unspecified", "::": "unspecified",
		"240.0.0.1": "reserved", "255.255.255.255": "reserved", "192.0.2.1": "reserved", "198.18.0.1": "reserved",
		"198.51.100.1": "reserved", "203.0.113.9": "reserved", "192.0.0.8": "reserved", "2001:db8::1": "reserved", "100::1": "reserved",
		"64:ff9b:1::a00:1": "reserved", "::10.0.0.1": "reserved",
		"169.254.169.254": "metadata", "fd00:ec2::254": "metadata", "168.63.129.16": "metadata", "100.100.100.200": "metadata",
		// Embeddings of IPv4 in IPv6.
		"::ffff:127.0.0.1": "loopback", "::ffff:169.254.169.254": "metadata", "::ffff:10.0.0.1": "private",
		"::ffff:0:10.0.0.1":                    "IPv4-translated of private",
		"64:ff9b::7f00:1":                      "NAT64 of loopback",
		"64:ff9b::a9fe:a9fe":                   "NAT64 of metadata",
		"2002:c0a8:101::1":                     "6to4 of private",
		"2002:7f00:1::":                        "6to4 of loopback",
		"2001:0:4136:e378:8000:63bf:f5ff:fffe": "Teredo of private", // client 10.0.0.1
		// Public: allowed.
		"93.184.216.34": "", "1.1.1.1": "", "172.32.0.1": "", "100.128.0.1": "", "2606:4700::1111": "",
		"2002:5db8:d822::1": "", "64:ff9b::5db8:d822": "", "::ffff:93.184.216.34": "",
	} {
		err := g.Check(addr, netip.MustParseAddr(addr), 443)
		var refused *RefusedError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: refused (%v), want allowed", addr, err)
		case want != "" && (!errors.As(err, &refused) || refused.Rule != want):
			t.Errorf("%s: %v, want refused as %q", addr, err, want)
		}
	}
}

// TestAllow: allow_networks opens its ranges, and only those.
func TestAllow(t *testing.T) {
	g := New(Options{Allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00:1::/32")}})
	for addr, ok := range map[string]bool{
		"10.20.1.1": true, "::ffff:10.20.1.1": true, "fd00:1::5": true,
		"10.21.0.1": false, "127.0.0.1": false, "169.254.169.254": false, "2002:a14:101::1": true, // 6to4 of 10.20.1.1
	} {
		if err := g.Check(addr, netip.MustParseAddr(addr), 80); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", addr, err, ok)
		}
	}
}

// TestAllowNeverOpensMetadata: a range that holds a metadata address
// opens it only when it is that address's own.
func TestAllowNeverOpensMetadata(t *testing.T) {
	for allow, addr := range map[string]string{"fd00::/8": "fd00:ec2::254", "169.254.0.0/16": "169.254.169.254", "100.64.0.0/10": "100.100.100.200", "0.0.0.0/0": "168.63.129.16"} {
		g := New(Options{Allow: []netip.Prefix{netip.MustParsePrefix(allow)}})
		var refused *RefusedError
		if err := g.Check(addr, netip.MustParseAddr(addr), 80); !errors.As(err, &refused) || refused.Rule != "metadata" {
			t.Errorf("allow %s: %s: %v, want refused as metadata", allow, addr, err)
		}
		a := netip.MustParseAddr(addr)
		exact := New(Options{Allow: []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}})
		if err := exact.Check(addr, a, 80); err != nil {
			t.Errorf("allow %s/%d: %v", addr, a.BitLen(), err)
		}
	}
	if err := New(Options{}).Check("fec0::1", netip.MustParseAddr("fec0::1"), 80); err == nil {
		t.Error("fec0::1 (site-local) allowed")
	}
}

// TestOwnListener: the gateway's own listeners are refused, on their
// address or, for one on an unspecified address, on any of the host's.
func TestOwnListener(t *testing.T) {
	public := netip.MustParseAddr("93.184.216.34")
	g := New(Options{
		Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, // opens every range, never the gateway itself
		Listeners: func() []netip.AddrPort {
			return []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:443"), netip.MustParseAddrPort("198.41.0.4:8080")}
		},
		LocalAddrs: func() []netip.Addr { return []netip.Addr{public} },
	})
	for ap, want := range map[string]bool{
		"93.184.216.34:443": true, "[::ffff:93.184.216.34]:443": true, "198.41.0.4:8080": true,
		"127.0.0.2:443": true, "[::1]:443": true, // loopback reaches a listener on every address
		"93.184.216.34:8443": false, "198.41.0.4:443": false, "1.1.1.1:443": false,
	} {
		a := netip.MustParseAddrPort(ap)
		err := g.Check(ap, a.Addr(), a.Port())
		var refused *RefusedError
		if got := errors.As(err, &refused) && refused.Rule == "own listener"; got != want {
			t.Errorf("%s: %v, want refused as own listener %v", ap, err, want)
		}
	}
}

// dnsServer is a local DNS server whose answers for a name are given in
// turn: the next lookup gets the next answer (the last repeats).
type dnsServer struct {
	mu      sync.Mutex
	answers map[string][][]string
	asked   map[string]int
	addr    string
}

func newDNSServer(t *testing.T, answers map[string][][]string) (*dnsServer, *net.Resolver) {
	t.Helper()
	s := &dnsServer{answers: answers, asked: map[string]int{}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = pc.LocalAddr().String()
	srv := &dns.Server{PacketConn: pc, Handler: s}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.addr)
	}}
	return s, r
}

func (s *dnsServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(req)
	q := req.Question[0]
	name := strings.TrimSuffix(q.Name, ".")
	all := s.answers[name]
	if len(all) == 0 {
		m.Rcode = dns.RcodeNameError
		_ = w.WriteMsg(m)
		return
	}
	i := min(s.asked[name+q.String()], len(all)-1)
	s.asked[name+q.String()]++
	for _, a := range all[i] {
		ip := netip.MustParseAddr(a)
		switch {
		case ip.Is4() && q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: ip.AsSlice()})
		case ip.Is6() && q.Qtype == dns.TypeAAAA:
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET}, AAAA: ip.AsSlice()})
		}
	}
	_ = w.WriteMsg(m)
}

// TestDNS, through a real resolver and a local DNS server: a name that
// answers a public and a private address is refused; a name whose answer
// changes between the check at create and the dial (rebinding) is
// refused at the dial; a name that answers a loopback address is never
// connected to, though something listens there.
func TestDNS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan struct{}, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	_, r := newDNSServer(t, map[string][][]string{
		"mixed.test":    {{"93.184.216.34", "10.0.0.1"}},
		"mixed6.test":   {{"93.184.216.34", "fd00::1"}},
		"rebind.test":   {{"93.184.216.34"}, {"127.0.0.1"}},
		"loopback.test": {{"127.0.0.1"}},
		"internal.test": {{"127.0.0.1"}},
	})
	g := New(Options{Resolver: r})
	ctx := context.Background()
	var refused *RefusedError

	for _, host := range []string{"mixed.test", "mixed6.test"} {
		if err := g.CheckURL(ctx, "https://"+host+"/hooks"); !errors.As(err, &refused) || refused.Rule != "private" {
			t.Errorf("%s: %v, want refused as private", host, err)
		}
	}
	if err := g.CheckURL(ctx, "https://rebind.test/hooks"); err != nil {
		t.Fatalf("rebind.test at create (a public answer): %v", err)
	}
	if _, err := g.DialContext(ctx, "tcp", net.JoinHostPort("rebind.test", strconv.Itoa(port))); !errors.As(err, &refused) || refused.Rule != "loopback" {
		t.Fatalf("rebind.test at the dial (now loopback): %v, want refused as loopback", err)
	}
	if _, err := g.DialContext(ctx, "tcp", net.JoinHostPort("loopback.test", strconv.Itoa(port))); !errors.As(err, &refused) {
		t.Fatalf("loopback.test: %v", err)
	}
	if _, err := g.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); !errors.As(err, &refused) {
		t.Fatalf("127.0.0.1: %v", err)
	}
	if len(accepted) != 0 {
		t.Fatalf("the guard connected %d times to a refused address", len(accepted))
	}
	if _, err := g.DialContext(ctx, "tcp", net.JoinHostPort("nowhere.test", strconv.Itoa(port))); err == nil || errors.As(err, &refused) {
		t.Fatalf("a name that does not resolve: %v", err)
	}

	// allow_networks opens the range: the same name now connects.
	open := New(Options{Resolver: r, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	conn, err := open.DialContext(ctx, "tcp", net.JoinHostPort("internal.test", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("an allowed range: %v", err)
	}
	_ = conn.Close()
	<-accepted
}

// TestControl: the dialer's last check refuses an address whatever
// resolved it (a transport that resolved on its own).
func TestControl(t *testing.T) {
	g := New(Options{})
	var refused *RefusedError
	if err := g.control("tcp4", "127.0.0.1:80", nil); !errors.As(err, &refused) {
		t.Fatalf("control: %v", err)
	}
	if err := g.control("tcp4", "93.184.216.34:80", nil); err != nil {
		t.Fatalf("control of a public address: %v", err)
	}
}

// TestListenAddrs reads Caddy's listen addresses.
func TestListenAddrs(t *testing.T) {
	got := ListenAddrs([]string{":443", "tcp/127.0.0.1:8080", "udp/[::1]:8443", "0.0.0.0:9000-9002", "unix//run/x.sock", "fd/3", "example.com:80", "bad"})
	want := []string{"[::]:443", "127.0.0.1:8080", "[::1]:8443", "0.0.0.0:9000", "0.0.0.0:9001", "0.0.0.0:9002"}
	if len(got) != len(want) {
		t.Fatalf("ListenAddrs = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("ListenAddrs = %v, want %v", got, want)
		}
	}
	if _, err := ParsePrefixes([]string{"10.0.0.0/8", "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("ParsePrefixes: %v", err)
	}
}
