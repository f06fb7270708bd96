// Package container holds the test of hookgate's container image: build.sh
// builds it with podman, and the test runs the binary from the image's
// unpacked file system, with the image's own config, environment and user.
package container

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/verify"
)

// devSecret is the public development secret: the test's own.
const devSecret = "whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA=="

// uid is the image's user.
const uid = 65532

// imageConfig is what podman image inspect says of the image's config.
type imageConfig struct {
	User         string
	Env          []string
	Entrypoint   []string
	Cmd          []string
	ExposedPorts map[string]struct{}
}

// TestImage builds the image with build.sh, unpacks its file system
// (podman create, podman export), checks what it holds, then runs the
// image's entry point from it, as its user, with its environment and its
// config: a signed delivery is forwarded once, its duplicate replayed.
// Containers cannot run on every machine (not on this project's), so the
// binary runs from the unpacked file system, its absolute paths (the
// config, /data) moved under it.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image with podman: skipped under -short")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not on PATH: install it (Debian: apt-get install podman); .ci/run does")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the test runs the image's binary as uid 65532, and unpacks its files with their owners: run it as root (CI does)")
	}
	tag := fmt.Sprintf("localhost/hookgate-test:%d", time.Now().UnixNano())
	start := time.Now()
	build := exec.Command("./build.sh", tag)
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	if err := build.Run(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, out.String())
	}
	took := time.Since(start)
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "--force", tag).Run() })

	var inspected []struct {
		Size   int64
		Config imageConfig
	}
	if err := json.Unmarshal(podman(t, "image", "inspect", tag), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("podman image inspect: %v", err)
	}
	cfg := inspected[0].Config
	t.Logf("build.sh took %s; the image is %.1f MB", took.Round(100*time.Millisecond), float64(inspected[0].Size)/1e6)
	if cfg.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.User)
	}
	if diff := cmp.Diff([]string{"/usr/bin/hookgate"}, cfg.Entrypoint); diff != "" {
		t.Errorf("entry point (-want +got):\n%s", diff)
	}
	for _, p := range []string{"8080/tcp", "9180/tcp"} {
		if _, ok := cfg.ExposedPorts[p]; !ok {
			t.Errorf("exposed ports %v, want %s (the gateway, the metrics)", cfg.ExposedPorts, p)
		}
	}
	env := map[string]string{}
	for _, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["XDG_DATA_HOME"] != "/data" {
		t.Errorf("XDG_DATA_HOME %q, want /data", env["XDG_DATA_HOME"])
	}
	const adminSocket = "unix//data/admin.sock|0600"
	if env["CADDY_ADMIN"] != adminSocket {
		t.Errorf("CADDY_ADMIN %q, want %s: the admin API on a socket only the image's user opens", env["CADDY_ADMIN"], adminSocket)
	}

	root := unpack(t, tag)
	checkFiles(t, root)

	// The receiver, and the gateway from the image in front of it.
	var got atomic.Int32
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		body, _ := io.ReadAll(r.Body)
		_, _ = fmt.Fprintf(w, "receiver got %s", body)
	}))
	defer rcv.Close()
	port, metrics := redistest.FreePort(t), redistest.FreePort(t)
	cmd := exec.Command(filepath.Join(root, cfg.Entrypoint[0]), underRoot(root, cfg.Cmd)...)
	cmd.Env = underRoot(root, cfg.Env)
	cmd.Env = append(cmd.Env, "HOOKGATE_SECRET="+devSecret, "HOOKGATE_UPSTREAM="+strings.TrimPrefix(rcv.URL, "http://"),
		"HOOKGATE_PORT="+strconv.Itoa(port), "HOOKGATE_METRICS_PORT="+strconv.Itoa(metrics))
	// The socket moves under root with /data.
	adminEnv := "unix/" + filepath.Join(root, strings.TrimSuffix(strings.TrimPrefix(adminSocket, "unix/"), "|0600")) + "|0600"
	cmd.Env = append(cmd.Env, "CADDY_ADMIN="+adminEnv)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	logs := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("hookgate logs:\n%s", logs.String())
		}
	}()
	gateway := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitReady(t, gateway+"/healthz", `{"status":"ok","store":"ok","sender":"off"}`)
	if u := processUID(t, cmd.Process.Pid); u != uid {
		t.Errorf("hookgate runs as uid %d, want %d", u, uid)
	}

	signer, err := verify.New("standard", []string{devSecret}, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"reservation.confirmed","reservation_id":"r-1"}`)
	id := fmt.Sprintf("msg_image_%d", time.Now().UnixNano())
	for i, replayed := range []string{"", "true"} {
		req, err := http.NewRequest(http.MethodPost, gateway+"/hooks", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = signer.Sign(id, time.Now(), body) // a retry signs again
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || string(answer) != "receiver got "+string(body) || resp.Header.Get("Idempotent-Replayed") != replayed {
			t.Errorf("copy %d: %d %q, Idempotent-Replayed %q; want 200, the receiver's answer, %q", i+1, resp.StatusCode, answer, resp.Header.Get("Idempotent-Replayed"), replayed)
		}
	}
	if n := got.Load(); n != 1 {
		t.Errorf("the receiver got %d copies, want 1", n)
	}

	// The metrics are on their own port, for Prometheus.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics))
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(scrape), `hookgate_dedupe_requests_total{result="replayed"} 1`) {
		t.Errorf("GET /metrics on the metrics port: %d; want the dedupe counters:\n%.2000s", resp.StatusCode, scrape)
	}

	// The admin API is a socket of mode 0600, the user's: hookgate's
	// commands run as the user reach it by the image's CADDY_ADMIN,
	// another user's are refused by the kernel.
	sock := filepath.Join(root, "data/admin.sock")
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 || ownerOf(t, sock) != uid {
		t.Fatalf("the admin socket %s: %v %v; want a socket of mode 0600, uid %d's", sock, fi, err, uid)
	}
	cli := func(user uint32, args ...string) (string, error) {
		c := exec.Command(filepath.Join(root, "usr/bin/hookgate"), args...)
		c.Env = append(underRoot(root, cfg.Env), "CADDY_ADMIN="+adminEnv)
		c.Dir = root
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: user, Gid: user}}
		out, err := c.CombinedOutput()
		return string(out), err
	}
	backup := filepath.Join(root, "data/backup.db")
	if out, err := cli(uid, "store", "backup", backup); err != nil || !strings.Contains(out, "sound") {
		t.Errorf("hookgate store backup as uid %d: %v\n%s", uid, err, out)
	}
	// Another user's own directory, so that only the socket can refuse.
	other := filepath.Join(root, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, int(uid+1), int(uid+1)); err != nil {
		t.Fatal(err)
	}
	if out, err := cli(uid+1, "store", "backup", filepath.Join(other, "backup.db")); err == nil || !strings.Contains(out, "admin.sock: connect: permission denied") {
		t.Errorf("hookgate store backup as uid %d: %v; want the socket to refuse it:\n%s", uid+1, err, out)
	}
	// The embedded store lives under /data, the user's.
	if owner := ownerOf(t, filepath.Join(root, "data/caddy/hookgate/state.db")); owner != uid {
		t.Errorf("state.db owned by %d, want %d", owner, uid)
	}
}

// podman runs podman and returns its standard output.
func podman(t *testing.T, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("podman", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// unpack exports the file system of a container made from the image (not
// started) into a directory that uid can reach, the files' owners kept.
func unpack(t *testing.T, tag string) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil { //nolint:gosec // G302: the image's user must reach its own files
			t.Fatal(err)
		}
	}
	id := strings.TrimSpace(string(podman(t, "create", tag)))
	defer podman(t, "rm", id)
	tarball := filepath.Join(t.TempDir(), "rootfs.tar")
	podman(t, "export", "--output", tarball, id)
	root := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil { //nolint:gosec // G301: as above
		t.Fatal(err)
	}
	// As root, tar keeps the owners.
	if out, err := exec.Command("tar", "-x", "--numeric-owner", "-f", tarball, "-C", root).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	return root
}

// checkFiles checks the image's files: the binary static, built with
// -trimpath; the CA bundle; the config; /data the user's.
func checkFiles(t *testing.T, root string) {
	t.Helper()
	bin := filepath.Join(root, "usr/bin/hookgate")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/usr/bin/hookgate is dynamically linked: a scratch image has no loader")
		}
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("built with CGO_ENABLED=%q -trimpath=%q, want 0 and true", settings["CGO_ENABLED"], settings["-trimpath"])
	}
	for _, p := range []string{"etc/ssl/certs/ca-certificates.crt", "etc/hookgate/Caddyfile"} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || fi.Size() == 0 {
			t.Errorf("/%s: %v", p, err)
		}
	}
	if owner := ownerOf(t, filepath.Join(root, "data")); owner != uid {
		t.Errorf("/data owned by %d, want %d", owner, uid)
	}
}

// underRoot moves the absolute paths of the image's file system found in
// args (NAME=value environment entries too) under root. PATH is left be.
func underRoot(root string, args []string) []string {
	top, _ := os.ReadDir(root)
	var names []string
	for _, e := range top {
		names = append(names, e.Name())
	}
	var out []string
	for _, a := range args {
		prefix, v := "", a
		if k, val, ok := strings.Cut(a, "="); ok && k != "" && !strings.HasPrefix(a, "/") {
			if k == "PATH" {
				out = append(out, a)
				continue
			}
			prefix, v = k+"=", val
		}
		if first, _, _ := strings.Cut(strings.TrimPrefix(v, "/"), "/"); strings.HasPrefix(v, "/") && slices.Contains(names, first) {
			v = filepath.Join(root, v)
		}
		out = append(out, prefix+v)
	}
	return out
}

// waitReady polls url until it answers 200 with want.
func waitReady(t *testing.T, url, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == 200 && strings.TrimSpace(string(body)) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d %s; want 200 %s", url, resp.StatusCode, body, want)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("%s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processUID is the real uid of a process.
func processUID(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	t.Fatal("no Uid line in /proc/<pid>/status")
	return -1
}

// ownerOf is a file's owner.
func ownerOf(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// syncBuffer is a bytes.Buffer safe for a process's stdout and stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
