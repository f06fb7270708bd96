package portcheck

import (
	"bufio"
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

// listenReusable listens on addr with SO_REUSEPORT, as Caddy does.
func listenReusable(t testing.TB, addr string) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1) })
		if err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestHelperListener is not a test: run by the tests below as a child
// process, it listens with SO_REUSEPORT, prints its address and waits.
func TestHelperListener(t *testing.T) {
	addr := os.Getenv("PORTCHECK_HELPER_LISTEN")
	if addr == "" {
		t.Skip("run as a child process by TestCheck")
	}
	ln := listenReusable(t, addr)
	fmt.Println("listening", ln.Addr())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
}

// otherProcess starts a child process listening on addr with SO_REUSEPORT
// and returns its pid and its listener's port.
func otherProcess(t *testing.T, addr string) (int, uint16) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperListener$", "-test.v")
	cmd.Env = append(os.Environ(), "PORTCHECK_HELPER_LISTEN="+addr)
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
