package portcheck

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestOverlap(t *testing.T) {
	p := func(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
	tests := []struct {
		a, b netip.AddrPort
		want bool
	}{
		{p("127.0.0.1:80"), p("127.0.0.1:80"), true},
		{p("127.0.0.1:80"), p("127.0.0.1:81"), false},
		{p("127.0.0.1:80"), p("127.0.0.2:80"), false},
		{p("[::]:80"), p("127.0.0.1:80"), true},
		{p("127.0.0.1:80"), p("[::]:80"), true},
		{p("0.0.0.0:80"), p("127.0.0.1:80"), true},
		{p("0.0.0.0:80"), p("[::1]:80"), false},
		{p("[::1]:80"), p("0.0.0.0:80"), false},
		{p("[::ffff:127.0.0.1]:80"), p("127.0.0.1:80"), true},
		{p("[::1]:80"), p("[::1]:80"), true},
	}
	for _, tt := range tests {
		if got := overlap(tt.a, tt.b); got != tt.want {
			t.Errorf("overlap(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// reusePort is a net.ListenConfig that sets SO_REUSEPORT, as Caddy's.
var reusePort = net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1) })
	if err != nil {
		return err
	}
	return serr
}}

// listenReusable listens on addr with SO_REUSEPORT, as Caddy does.
func listenReusable(t testing.TB, addr string) net.Listener {
	t.Helper()
	ln, err := reusePort.Listen(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestHelperListener is not a test: run by the tests below as a child
// process, it listens with SO_REUSEPORT (a UDP socket, as HTTP/3's, under
// PORTCHECK_HELPER_NETWORK=udp), prints its address and waits.
func TestHelperListener(t *testing.T) {
	addr := os.Getenv("PORTCHECK_HELPER_LISTEN")
	if addr == "" {
		t.Skip("run as a child process by TestCheck")
	}
	if os.Getenv("PORTCHECK_HELPER_NETWORK") == "udp" {
		pc, err := reusePort.ListenPacket(t.Context(), "udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("listening", pc.LocalAddr())
	} else {
		fmt.Println("listening", listenReusable(t, addr).Addr())
	}
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
}

// otherProcess starts a child process listening on addr with SO_REUSEPORT
// and returns its pid and its listener's port.
func otherProcess(t *testing.T, addr string) (int, uint16) {
	t.Helper()
	return otherProcessOn(t, "tcp", addr)
}

// otherProcessOn is otherProcess on network, tcp or udp.
func otherProcessOn(t *testing.T, network, addr string) (int, uint16) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperListener$", "-test.v")
	cmd.Env = append(os.Environ(), "PORTCHECK_HELPER_LISTEN="+addr, "PORTCHECK_HELPER_NETWORK="+network)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			go func() {
				for sc.Scan() { // drain the rest
				}
			}()
			return cmd.Process.Pid, netip.MustParseAddrPort(a).Port()
		}
	}
	t.Fatalf("the child process did not listen: %v", sc.Err())
	return 0, 0
}

func TestCheck(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Check finds nothing outside Linux")
	}
	t.Run("ours", func(t *testing.T) {
		ln := listenReusable(t, "127.0.0.1:0")
		defer func() { _ = ln.Close() }()
		port := uint16(ln.Addr().(*net.TCPAddr).Port)
		// Ours twice, as a reload holds the old listener and binds anew.
		ln2 := listenReusable(t, ln.Addr().String())
		defer func() { _ = ln2.Close() }()
		if err := Check(t.Context(), []Target{{Host: "127.0.0.1", Port: port}, {Port: port}}); err != nil {
			t.Errorf("Check of our own listener: %v, want nil", err)
		}
	})
	t.Run("another process", func(t *testing.T) {
		pid, port := otherProcess(t, "127.0.0.1:0")
		for _, target := range []Target{{Host: "127.0.0.1", Port: port}, {Host: "", Port: port}, {Host: "localhost", Port: port}} {
			err := Check(t.Context(), []Target{target})
			var c *Conflict
			if !errors.As(err, &c) {
				t.Fatalf("Check(%+v) = %v, want a *Conflict", target, err)
			}
			if c.PID != pid || c.Other != netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port) {
				t.Errorf("Check(%+v): pid %d, other %v; want pid %d, 127.0.0.1:%d", target, c.PID, c.Other, pid, port)
			}
			want := fmt.Sprintf("is already served by another process; hookgate listens with SO_REUSEPORT and would share it silently, each process answering some of the connections: stop the other process (pid %d, ", pid)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Check(%+v) = %q, want it to contain %q", target, err, want)
			}
		}
		if err := Check(t.Context(), []Target{{Host: "127.0.0.2", Port: port}, {Host: "127.0.0.1", Port: port + 1}}); err != nil {
			t.Errorf("Check of other addresses: %v, want nil", err)
		}
	})
	t.Run("another process on an address we listen on", func(t *testing.T) {
		ln := listenReusable(t, "127.0.0.1:0")
		defer func() { _ = ln.Close() }()
		_, port := otherProcess(t, ln.Addr().String())
		err := Check(t.Context(), nil) // no target: our own listeners are checked
		var c *Conflict
		if !errors.As(err, &c) || c.Addr.Port() != port {
			t.Errorf("Check(nil) = %v, want a *Conflict on port %d", err, port)
		}
	})
}

// TestCheckUDP: HTTP/3's UDP sockets use SO_REUSEPORT too: another
// process's bound UDP socket on a UDP target is a conflict, not on a TCP
// target of the same port.
func TestCheckUDP(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Check finds nothing outside Linux")
	}
	pid, port := otherProcessOn(t, "udp", "127.0.0.1:0")
	for _, target := range []Target{{Network: "udp", Host: "127.0.0.1", Port: port}, {Network: "udp", Port: port}} {
		err := Check(t.Context(), []Target{target})
		var c *Conflict
		if !errors.As(err, &c) || c.PID != pid || c.Network != "udp" {
			t.Fatalf("Check(%+v) = %v, want a UDP *Conflict with pid %d", target, err, pid)
		}
		if want := fmt.Sprintf("UDP address %s is already served by another process", show(c.Addr)); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Check(%+v) = %q, want it to start %q", target, err, want)
		}
	}
	if err := Check(t.Context(), []Target{{Network: "tcp", Host: "127.0.0.1", Port: port}}); err != nil {
		t.Errorf("Check of TCP on the port of another's UDP socket: %v, want nil", err)
	}
	// Our own UDP socket on the port is no conflict with ourselves, but
	// is checked as ours are: the other process is found.
	pc, err := reusePort.ListenPacket(t.Context(), "udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pc.Close() }()
	var c *Conflict
	if err := Check(t.Context(), nil); !errors.As(err, &c) || c.Network != "udp" || c.Addr.Port() != port {
		t.Errorf("Check(nil) beside our own UDP socket = %v, want a UDP *Conflict on port %d", err, port)
	}
}

// TestCheckNameOnBoundAddress: a host name is checked on the one address
// Go binds for it (the first IPv4 address it resolves to, else the
// first), not on every address it resolves to.
func TestCheckNameOnBoundAddress(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Check finds nothing outside Linux")
	}
	_, port := otherProcess(t, "127.0.0.2:0")
	p := netip.MustParseAddr
	for _, tc := range []struct {
		network  string
		resolved []netip.Addr
		conflict bool
	}{
		{"tcp", []netip.Addr{p("127.0.0.2"), p("127.0.0.3")}, true},
		{"tcp", []netip.Addr{p("127.0.0.3"), p("127.0.0.2")}, false},
		{"tcp", []netip.Addr{p("::1"), p("127.0.0.2")}, true},   // Go prefers IPv4
		{"tcp6", []netip.Addr{p("::1"), p("127.0.0.2")}, false}, // IPv6 only
		{"tcp4", []netip.Addr{p("::1"), p("127.0.0.2")}, true},
	} {
		c := checker{proc: "/proc", lookup: func(context.Context, string) ([]netip.Addr, error) { return tc.resolved, nil }}
		err := c.check(t.Context(), []Target{{Network: tc.network, Host: "gateway.test", Port: port}})
		if got := err != nil; got != tc.conflict {
			t.Errorf("%s on a name resolving to %v: %v; want a conflict: %v", tc.network, tc.resolved, err, tc.conflict)
		}
	}
	// The address bound is the one Go's net.Listen binds.
	ln, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	got, ok := checker{lookup: lookupNetIP}.bound(t.Context(), "tcp", "localhost")
	if want := ln.Addr().(*net.TCPAddr).AddrPort().Addr().Unmap(); !ok || got != want {
		t.Errorf("bound(tcp, localhost) = %v, %v; net.Listen bound %v", got, ok, want)
	}
}

// TestCheckWithoutProc: when the proc file system cannot be read (a
// chroot without /proc), Check says it could not check, with
// ErrUnchecked, which the gateway only warns of.
func TestCheckWithoutProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Check finds nothing outside Linux")
	}
	empty := t.TempDir()
	err := checker{proc: empty, lookup: lookupNetIP}.check(t.Context(), []Target{{Port: 8080}})
	if !errors.Is(err, ErrUnchecked) || !strings.Contains(err.Error(), "reading "+empty) {
		t.Errorf("check without /proc = %v, want ErrUnchecked naming %s", err, empty)
	}
}
