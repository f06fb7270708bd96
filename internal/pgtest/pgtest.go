// Package pgtest starts a real PostgreSQL server for tests: initdb into a
// temporary directory, postgres on a free loopback port, stopped when the
// test ends. It needs PostgreSQL's server binaries (Debian's postgresql
// package; .ci/run installs it) and fails the test when they are missing.
// Under go test -short (the fast tier, which needs no PostgreSQL) Start
// skips the test instead, before looking for the binaries; only -short
// skips. As root it runs them as the postgres user (initdb refuses root).
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one postgres process.
type Server struct {
	Port int
	dir  string
}

// DSN is a connection string to database postgres as user postgres.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
}

// binDir finds the directory of initdb and postgres.
func binDir(t testing.TB) string {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	t.Fatal("PostgreSQL's initdb is not installed: install it (Debian: apt-get install postgresql); .ci/run does")
	return ""
}

// command runs a server binary, as the postgres user when we are root.
func command(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// Start initialises and starts a server, stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL: skipped under -short")
	}
	bin := binDir(t)
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // best effort: a temporary directory left behind fails nothing
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user to run PostgreSQL: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s := &Server{dir: dir}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close() // it only found a free port
	cmd := command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir, "-c", "fsync=off")
	logf, err := os.CreateTemp("", fmt.Sprintf("pgtest-%d-*.log", s.Port))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	// Stopping is best effort: the server goes with the test either way,
	// and an interrupted server exits with an error Wait reports.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
		_ = os.Remove(logf.Name())
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.DSN())
		cancel()
		if err == nil {
			_ = conn.Close(context.Background()) // only a probe: the server answered
			return s
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("postgres did not answer in 20s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
