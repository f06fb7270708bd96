// Package redistest starts real redis-server processes on free loopback
// ports for tests: single nodes that a test may stop and restart, and a
// three-master Cluster. It needs redis-server and redis-cli on PATH and
// fails the test when they are missing. Under go test -short (the fast
// tier, which needs no Redis) every Start skips the test instead, before
// looking for the binaries; only -short skips.
package redistest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	Port int
	dir  string
	args []string
	cmd  *exec.Cmd
	// exited is closed once the running process has exited and been
	// reaped.
	exited chan struct{}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Prefix is a key prefix of a test's own: name and 12 random hex digits,
// so that tests sharing a server never meet in its keys.
func Prefix(name string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return name + hex.EncodeToString(b)
}

// Start starts a single redis-server, without persistence, stopped when the
// test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil)
}

// StartWith starts a single redis-server with extra arguments, such as
// "--maxmemory-policy", "volatile-lru".
func StartWith(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, extra)
}

func start(t testing.TB, extra []string) *Server {
	t.Helper()
	skipShort(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not on PATH: install it (Debian: apt-get install redis-server); .ci/run does")
	}
	s := &Server{t: t, Port: FreePort(t), dir: t.TempDir(), args: extra}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// skipShort skips the test under go test -short: the fast tier runs
// without Redis. Without -short a missing redis-server is a failure.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs redis-server: skipped under -short")
	}
}

// Restart starts the server again on the same port after Stop.
func (s *Server) Restart() {
	s.t.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait() // it ends killed, or early; exited says which
		close(exited)
	}(s.cmd)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr()) {
			return
		}
		select {
		case <-exited:
			s.t.Fatalf("redis-server on %s exited at start:\n%s", s.Addr(), s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer in 10s:\n%s", s.Addr(), s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail is the end of the server's log, for a failure message.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// startClusterNode starts a cluster-mode node. Its cluster bus port is one
// FreePort handed out too: by default Redis takes port+10000, which no one
// reserved, and a node whose bus port was taken exited at start (seen in
// CI: "did not answer in 10s").
func startClusterNode(t testing.TB, nodeTimeout time.Duration) *Server {
	t.Helper()
	return start(t, []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(FreePort(t)),
		"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)})
}

// Stop kills the server.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill() // it may have exited already
	<-s.exited
	s.cmd = nil
}

// ping sends PING over RESP and reports whether PONG came back.
func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }() // only a probe
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return false
	}
	if _, err := fmt.Fprint(c, "PING\r\n"); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// StartCluster starts three masters with cluster mode on and joins them
// with redis-cli --cluster create. It returns their addresses.
func StartCluster(t testing.TB) []string {
	t.Helper()
	skipShort(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not on PATH: install it (Debian: apt-get install redis-server); .ci/run does")
	}
	var addrs []string
	for range 3 {
		// No test stops a node of the Cluster, so a long node timeout
		// costs nothing, and a node slow to answer on a loaded machine
		// (2 s was seen: CLUSTERDOWN) is not marked failed.
		s := startClusterNode(t, 30*time.Second)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Wait until every node reports the cluster ok.
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		for {
			out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok after 20s: %s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return addrs
}

// handedOut holds every port FreePort has returned in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a loopback port that was free a moment ago and that it
// has not returned before in this process, nor in any other test process
// still running (the tests of the hookgate binary use it for their
// gateways too, and two suites may run at once). The kernel may hand a
// closed ephemeral port out again, and Caddy listens with SO_REUSEPORT:
// two gateways given the same port would both bind it and split its
// connections between them.
func FreePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close() // it only found a free port
		if !handedOut.ports[port] && reserve(port) {
			handedOut.ports[port] = true
			return port
		}
	}
}

// reserve claims port for this process among the test processes of the
// machine's user: a file named for the port holds the PID of the process
// that has it, and a file whose process is gone is taken over. It reports
// whether this process now holds the port; without a usable directory of
// reservations, only the in-process ones hold, and it says yes.
func reserve(port int) bool {
	dir := portsDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return true
	}
	path := filepath.Join(dir, strconv.Itoa(port))
	pid := []byte(strconv.Itoa(os.Getpid()))
	for range 2 {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, err = f.Write(pid)
			return f.Close() == nil && err == nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return true
		}
		held, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		owner, err := strconv.Atoi(string(held))
		if err == nil && (owner == os.Getpid() || processAlive(owner)) {
			return false
		}
		_ = os.Remove(path) // its process is gone (or it was never written whole)
	}
	return false
}

// portsDir is where the machine's user's test processes reserve ports.
func portsDir() string {
	return filepath.Join(os.TempDir(), "hookgate-test-ports-"+strconv.Itoa(os.Getuid()))
}

// processAlive reports whether a process of that PID runs.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM // EPERM: another user's
}

// StartSentinel starts a Sentinel monitoring master under the name
// "mymaster" and returns its address once it knows the master.
func StartSentinel(t testing.TB, master *Server) string {
	t.Helper()
	skipShort(t)
	addr := runSentinel(t, fmt.Sprintf("sentinel monitor mymaster 127.0.0.1 %d 1\nsentinel down-after-milliseconds mymaster 2000\n", master.Port))
	_, port, _ := strings.Cut(addr, ":")
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := exec.Command("redis-cli", "-p", port, "sentinel", "get-master-addr-by-name", "mymaster").Output()
		if strings.Contains(string(out), strconv.Itoa(master.Port)) {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel on %s does not know the master after 10s: %s", addr, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runSentinel starts a Sentinel on a free loopback port with config (the
// lines after port, bind and dir), stopped when the test ends, and
// returns its address. The file is Sentinel's own: it rewrites it as it
// learns.
func runSentinel(t testing.TB, config string) string {
	t.Helper()
	port := FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	content := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n", port, dir) + config
	if err := os.WriteFile(conf, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel", "--logfile", filepath.Join(dir, "sentinel.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis sentinel: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) // reaped; Wait reports the kill
	return "127.0.0.1:" + strconv.Itoa(port)
}

// CPU is redis-server's CPU time so far, user and system, read from the
// text of INFO cpu (or of any INFO that includes its section).
func CPU(info string) (time.Duration, error) {
	var sum time.Duration
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "used_cpu_sys" && k != "used_cpu_user" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO %s: %w", k, err)
		}
		sum += time.Duration(f * float64(time.Second))
	}
	return sum, nil
}
