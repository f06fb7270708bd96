package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuickstartOnOtherPorts follows the README's recipe for running the
// quickstart when its ports are taken: :8080 (the site) and the two
// 9090s (the stand-in receiver and reverse_proxy) changed, the admin
// endpoint moved with `admin` in the global options; a signed webhook
// then reaches the receiver, and `hookgate stop --address` stops it.
func TestQuickstartOnOtherPorts(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"`:8080` is the\ngateway's site", "`9090` appears twice", "`admin localhost:2020`", "`hookgate stop --address localhost:2020`"} {
		if !strings.Contains(string(readme), step) {
			t.Errorf("README.md's recipe for other ports lacks %q", step)
		}
	}
	b, err := os.ReadFile("../caddyfiles/quickstart.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	config := string(b)
	lines := func(s string) int { // the lines of config, outside comments, holding s
		n := 0
		for l := range strings.Lines(config) {
			if code, _, _ := strings.Cut(l, "#"); strings.Contains(code, s) {
				n++
			}
		}
		return n
	}
	if lines(":8080") != 1 || lines("9090") != 2 || lines("persist_config off") != 1 {
		t.Fatalf("the quickstart no longer has one :8080, two 9090s and a global options block: update the README's recipe")
	}
	site, receiver, admin := freePort(t), freePort(t), freePort(t)
	config = strings.ReplaceAll(config, ":8080", fmt.Sprintf(":%d", site))
	config = strings.ReplaceAll(config, "9090", fmt.Sprint(receiver))
	config = strings.Replace(config, "\tpersist_config off", fmt.Sprintf("\tadmin localhost:%d\n\tpersist_config off", admin), 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "quickstart.Caddyfile")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOOKGATE_SECRET="+devSecret, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	run := exec.Command(binary, "run", "--config", path)
	run.Env = env
	logs := new(syncBuffer)
	run.Stdout, run.Stderr = logs, logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	t.Cleanup(func() {
		_ = run.Process.Kill()
		<-done //nolint:errcheck // killed: its exit status says nothing
		if t.Failed() {
			t.Logf("hookgate logs:\n%s", logs.String())
		}
	})
	waitFor(t, "the quickstart's site", func() bool {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", site))
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	})
	sign := exec.Command(binary, "sign", "--send", fmt.Sprintf("http://127.0.0.1:%d/", site), "--id", "msg_ports", `{"type":"ping"}`)
	sign.Env = env
	if out, err := sign.CombinedOutput(); err != nil || !strings.Contains(string(out), "receiver got msg_ports") {
		t.Fatalf("hookgate sign --send: %v\n%s", err, out)
	}
	stop := exec.Command(binary, "stop", "--address", fmt.Sprintf("localhost:%d", admin))
	stop.Env = env
	if out, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("hookgate stop --address: %v\n%s", err, out)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("hookgate still runs 20s after hookgate stop")
	}
}
