package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// TestStoreBackupUnderLoad: `hookgate store backup` copies a running
// gateway's embedded store while webhooks flow through it (four senders,
// none stopped); `store check` finds the copy sound; a new gateway started
// on the copy replays every delivery answered before the backup began
// (its upstream sees none of them) and forwards a new one.
func TestStoreBackupUnderLoad(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})
	s := signer(t, "standard", devSecret)
	body := func(id string) []byte {
		return []byte(`{"type":"reservation.confirmed","reservation_id":"` + id + `"}`)
	}
	deliver := func(url, id string) (int, http.Header, error) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body(id)))
		if err != nil {
			return 0, nil, err
		}
		for k, v := range s.Sign(id, time.Now(), body(id)) {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header, nil
	}

	// The load: four senders, each delivering new IDs until told to stop.
	var mu sync.Mutex
	var answered []string // in the order answered
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("msg_load_%d_%d", w, i)
				st, _, err := deliver(g.URL, id)
				if err != nil || st != 200 {
					t.Errorf("%s: %d %v", id, st, err)
					return
				}
				sent.Add(1)
				mu.Lock()
				answered = append(answered, id)
				mu.Unlock()
			}
		})
	}
	waitFor := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for sent.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d deliveries in a minute", sent.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(300)
	mu.Lock()
	before := append([]string(nil), answered...)
	mu.Unlock()
	file := filepath.Join(t.TempDir(), "backup.db")
	out, err := exec.Command(binary, "store", "backup", file, "--address", g.Admin).CombinedOutput()
	during := sent.Load() - int64(len(before))
	waitFor(sent.Load() + 20) // still flowing after the backup
	close(stop)
	wg.Wait()
	if err != nil || !strings.HasPrefix(string(out), file+": ") || !strings.HasSuffix(string(out), ": sound\n") {
		t.Fatalf("store backup: %v\n%s", err, out)
	}
	t.Logf("backed up under load: %d deliveries answered before, %d while the backup ran; %s", len(before), during, out)
	if out, err := exec.Command(binary, "store", "check", file).CombinedOutput(); err != nil || string(out) != file+": sound\n" {
		t.Errorf("store check of the copy: %v\n%s", err, out)
	}

	// Restore: the copy is the new gateway's state.db, under its data
	// directory (Caddy's, $XDG_DATA_HOME/caddy).
	data := t.TempDir()
	restored := filepath.Join(data, "caddy", "hookgate", "state.db")
	if err := os.MkdirAll(filepath.Dir(restored), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(restored, b, 0o600); err != nil {
		t.Fatal(err)
	}
	g.Stop()
	up2 := newUpstream(t, nil)
	g2 := startGateway(t, dedupeSite(up2.Addr(), ""), gatewayOptions{DataDir: data})
	for _, id := range before {
		st, hdr, err := deliver(g2.URL, id)
		if err != nil || st != 200 || hdr.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the duplicate %s on the restored gateway: %d %v, Idempotent-Replayed %q; want its recorded answer replayed", id, st, err, hdr.Get("Idempotent-Replayed"))
		}
	}
	if n := up2.count(); n != 0 {
		t.Errorf("the restored gateway forwarded %d duplicates", n)
	}
	if st, hdr, err := deliver(g2.URL, "msg_after_restore"); err != nil || st != 200 || hdr.Get("Idempotent-Replayed") != "" || up2.count() != 1 {
		t.Errorf("a new delivery on the restored gateway: %d %v, replayed %q, forwarded %d; want it forwarded", st, err, hdr.Get("Idempotent-Replayed"), up2.count())
	}
}

// TestStoreBackupRefusals: a gateway on Redis answers 409 store_not_file,
// and the command exits 1 naming Redis's own persistence, writing
// nothing; with no gateway it asks whether one runs.
func TestStoreBackupRefusals(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, nil)
	g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{Global: redisGlobal(srv.URL())})
	st, hdr, b := send(t, http.MethodGet, g.Admin+"/hookgate/store/backup", nil, nil)
	if st != 409 || problemBody(t, st, hdr, b) != "store_not_file" {
		t.Errorf("GET /hookgate/store/backup on Redis: %d %s", st, b)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	out, err := exec.Command(binary, "store", "backup", file, "--address", g.Admin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "back it up with Redis's own persistence") || !strings.Contains(string(out), "(409 store_not_file)") {
		t.Errorf("store backup on Redis: %v\n%s", err, out)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("store backup on Redis wrote %s: %v", file, err)
	}
	out, err = exec.Command(binary, "store", "backup", file, "--address", fmt.Sprintf("127.0.0.1:%d", freePort(t))).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is the gateway running with its admin API on") {
		t.Errorf("store backup with no gateway: %v\n%s", err, out)
	}
}
