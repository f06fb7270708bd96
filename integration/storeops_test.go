package integration

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
)

// TestHealthWhenRedisRefusesWrites: a Redis out of memory under
// noeviction answers PING and refuses every write. Once a delivery has met
// the refusal (503 store_unavailable), /healthz answers 503 naming the
// store, until Redis takes writes again: then 200 at the next probe, with
// no delivery needed.
func TestHealthWhenRedisRefusesWrites(t *testing.T) {
	srv := redistest.StartWith(t, "--maxmemory-policy", "noeviction")
	up := newUpstream(t, nil)
	site := `handle /healthz {
		webhook_health
	}
	handle {` + dedupeSite(up.Addr(), "") + `
	}`
	g := startGateway(t, site, gatewayOptions{Global: redisGlobal(srv.URL())})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := signer(t, "standard", devSecret)
	deliver := func(id string) int {
		t.Helper()
		body := []byte(`{"type":"ping"}`)
		req, err := http.NewRequest(http.MethodPost, g.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range s.Sign(id, time.Now(), body) {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	health := func() (int, string) {
		t.Helper()
		st, _, b := send(t, http.MethodGet, g.URL+"/healthz", nil, nil)
		return st, strings.TrimSpace(string(b))
	}
	const ready = `{"status":"ok","store":"ok","sender":"off"}`
	if st := deliver("msg_before"); st != 200 {
		t.Fatalf("a delivery: %d", st)
	}
	if st, body := health(); st != 200 || body != ready {
		t.Fatalf("writes work: %d %s; want 200 %s", st, body, ready)
	}

	if err := rdb.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if st := deliver("msg_oom"); st != 503 {
		t.Fatalf("a delivery while Redis refuses writes: %d; want 503", st)
	}
	const unready = `{"status":"unavailable","store":"unavailable","sender":"off"}`
	for i := range 2 {
		if st, body := health(); st != 503 || body != unready {
			t.Fatalf("writes refused, check %d: %d %s; want 503 %s", i, st, body, unready)
		}
	}

	if err := rdb.ConfigSet(t.Context(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if st, body := health(); st != 200 || body != ready {
		t.Fatalf("writes work again: %d %s; want 200 %s", st, body, ready)
	}
	if st := deliver("msg_after"); st != 200 {
		t.Errorf("a delivery once Redis takes writes: %d", st)
	}
}

// TestStopWaitsForTheExit: `hookgate stop` returns once the gateway's
// process has exited (gone, or a zombie its parent has not reaped yet),
// so docs/operations.md's restore recipe (stop, then put the backup in place)
// never races it. An admin request in flight (here an upload that stalls,
// as a stalled backup download would) holds the exit back until Caddy's
// admin server gives up on it, 10 s later: Caddy's own stop returned at
// once.
func TestStopWaitsForTheExit(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, dedupeSite(up.Addr(), ""), gatewayOptions{})
	pid := g.cmd.Process.Pid
	admin := strings.TrimPrefix(g.Admin, "http://")
	conn, err := net.Dial("tcp", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := fmt.Fprintf(conn, "POST /load HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", admin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "stop", "--address", admin).CombinedOutput()
	if err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err == nil {
		state := strings.TrimSpace(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if !strings.HasPrefix(state, "Z") {
			t.Fatalf("stop returned while the gateway's process %d still runs (state %.1s)\n%s", pid, state, out)
		}
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(out) != 0 {
		t.Errorf("stop printed %q; want nothing", out)
	}

}
