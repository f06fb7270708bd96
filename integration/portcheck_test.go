package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSharedUDPRefused: a gateway serving HTTP/3 listens on UDP with
// SO_REUSEPORT too, so another process's UDP socket on its port is
// refused, as a TCP listener is.
func TestSharedUDPRefused(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1) })
		if err != nil {
			return err
		}
		return serr
	}}
	other, err := lc.ListenPacket(t.Context(), "udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	port := other.LocalAddr().(*net.UDPAddr).Port
	out := runRefused(t, fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	skip_install_trust
	http_port %d
	auto_https disable_redirects
}

https://127.0.0.1:%d {
	tls internal
	bind 127.0.0.1
	webhook_health
}
`, freePort(t), freePort(t), port))
	want := fmt.Sprintf("UDP address 127.0.0.1:%d is already served by another process", port)
	if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("the gateway's output lacks %q and this process's pid:\n%s", want, out)
	}
}

// TestStartsWithoutProc: where /proc cannot be read (a chroot without
// it; here a mount namespace with an empty /proc), the shared-address
// check cannot run: the gateway warns and serves.
func TestStartsWithoutProc(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("unshare is not on PATH (Debian: util-linux)")
	}
	dir := t.TempDir()
	port := freePort(t)
	config := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(config, fmt.Appendf(nil, "{\n\tadmin off\n\tpersist_config off\n}\n\nhttp://127.0.0.1:%d {\n\twebhook_health\n}\n", port), 0o600); err != nil {
		t.Fatal(err)
	}
	// A user namespace maps this user to root in it, so that the mount
	// needs no privilege of the caller's.
	cmd := exec.Command("unshare", "--map-root-user", "--mount", "sh", "-c", `mount -t tmpfs none /proc && exec "$0" run --config "$1"`, binary, config)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	logs := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		if t.Failed() {
			t.Logf("hookgate logs:\n%s", logs)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /: %d %s; want 200", resp.StatusCode, body)
			}
			break
		}
		select {
		case <-done:
			t.Fatal("the gateway exited; want it to serve without /proc")
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway does not serve after 30s: %v", err)
		}
	}
	if want := `"msg":"not checking for another process on the gateway's addresses; starting anyway","error":"cannot tell whether another process listens on the gateway's addresses: reading /proc: `; !strings.Contains(logs.String(), want) {
		t.Errorf("the gateway does not warn %s", want)
	}
}
