package integration

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/hookgate/hookgate/dedupe"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/verify"
)

// TestCLIKnowsItsName: version and help name hookgate, not caddy.
func TestCLIKnowsItsName(t *testing.T) {
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hookgate ") || !strings.Contains(string(out), "Caddy v2.") {
		t.Errorf("hookgate version: %v\n%s", err, out)
	}
	out, _ = exec.Command(binary, "help", "sign").CombinedOutput()
	if !strings.Contains(string(out), "hookgate sign [--scheme") || strings.Contains(string(out), "caddy sign") {
		t.Errorf("hookgate help sign:\n%s", out)
	}
	root, _ := exec.Command(binary, "--help").CombinedOutput()
	if !strings.HasPrefix(string(root), "hookgate is a webhook reliability layer") {
		t.Errorf("hookgate --help:\n%s", root)
	}
	// Each of hookgate's commands: listed in the root's help, its own help
	// names it as hookgate's and points to hookgate's docs.
	for _, name := range []string{"sign", "dedupe", "freshness", "dlq", "deliveries", "destinations", "reconcile", "store"} {
		if !strings.Contains(string(root), "\thookgate "+name+" ") {
			t.Errorf("hookgate --help does not describe hookgate %s", name)
		}
		out, _ := exec.Command(binary, "help", name).CombinedOutput()
		help := string(out)
		if !strings.Contains(help, "hookgate "+name+" ") || strings.Contains(help, "caddy "+name) ||
			!strings.Contains(help, "github.com/hookgate/hookgate") || strings.Contains(help, "caddyserver.com") {
			t.Errorf("hookgate help %s:\n%s", name, help)
		}
	}
}

// TestSignSendHeaders: sign --send adds -H headers and the content type.
func TestSignSendHeaders(t *testing.T) {
	up := newUpstream(t, nil)
	cmd := exec.Command(binary, "sign", "--secret", devSecret, "--id", "msg_cli",
		"--send", up.URL, "-H", "X-Tenant: t-1", "-H", "X-Trace: a:b", "--content-type", "text/plain", "hello")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 200 OK") {
		t.Fatalf("sign --send: %v\n%s", err, out)
	}
	rs := up.received()
	if len(rs) != 1 {
		t.Fatalf("upstream got %d requests", len(rs))
	}
	h := rs[0].Header
	if h.Get("X-Tenant") != "t-1" || h.Get("X-Trace") != "a:b" || h.Get("Content-Type") != "text/plain" || h.Get("Webhook-Id") != "msg_cli" {
		t.Errorf("headers sent: %v", h)
	}
	if _, err := signer(t, "standard", devSecret).Verify(verify.Request{Header: h, Body: rs[0].Body}, time.Now()); err != nil {
		t.Errorf("the request does not verify: %v", err)
	}
	out, err := exec.Command(binary, "sign", "--secret", devSecret, "--send", up.URL, "-H", "no-colon", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "want 'Name: value'") {
		t.Errorf("a bad -H: %v\n%s", err, out)
	}
}

// TestStartupLogNamesTheStore: at start, one line says which store is
// used, where, and whether it answered; with Redis down, a warning, and
// go-redis's own lines are JSON like the rest.
func TestStartupLogNamesTheStore(t *testing.T) {
	up := newUpstream(t, nil)
	site := dedupeSite(up.Addr(), "")
	waitLog := func(g *gateway, want string) string {
		deadline := time.Now().Add(15 * time.Second)
		for !strings.Contains(g.logs.String(), want) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		logs := g.logs.String()
		if !strings.Contains(logs, want) {
			t.Fatalf("no %q in the log:\n%s", want, logs)
		}
		return logs
	}
	t.Run("file", func(t *testing.T) {
		g := startGateway(t, site, gatewayOptions{})
		logs := waitLog(g, `"msg":"store: the embedded file"`)
		if !strings.Contains(logs, `"path":"`+g.DataDir+`/caddy/hookgate/state.db","answered":true`) {
			t.Errorf("the store line lacks the path:\n%s", logs)
		}
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		g := startGateway(t, site, gatewayOptions{Global: redisGlobal(srv.URL())})
		logs := waitLog(g, `"msg":"store: Redis"`)
		if !strings.Contains(logs, `"addrs":["`+srv.Addr()+`"],"answered":true`) {
			t.Errorf("the store line lacks the address:\n%s", logs)
		}
	})
	t.Run("redis down", func(t *testing.T) {
		port := freePort(t)
		g := startGateway(t, site, gatewayOptions{Global: redisGlobal(fmt.Sprintf("redis://:pw-%d@127.0.0.1:%d", port, port))})
		body := []byte(`{}`)
		post(t, g.URL, signer(t, "standard", devSecret).Sign(randomID("msg_"), time.Now(), body), body)
		logs := waitLog(g, "Redis does not answer at start")
		for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			if !json.Valid([]byte(line)) {
				t.Errorf("a log line is not JSON: %s", line)
			}
		}
		if strings.Contains(logs, fmt.Sprintf("pw-%d", port)) {
			t.Errorf("the log shows the Redis password:\n%s", logs)
		}
	})
	t.Run("redis down, then up", func(t *testing.T) {
		// Down at start, then up: the gateway says so, and checks the
		// eviction policy then.
		srv := redistest.StartWith(t, "--maxmemory-policy", "allkeys-lru")
		srv.Stop()
		g := startGateway(t, site, gatewayOptions{Global: redisGlobal(srv.URL())})
		waitLog(g, "Redis does not answer at start")
		srv.Restart()
		logs := waitLog(g, `"maxmemory-policy":"allkeys-lru"`)
		if !strings.Contains(logs, `"msg":"store: Redis answers now"`) {
			t.Errorf("no line that Redis answers now:\n%s", logs)
		}
	})
}

// TestDedupeLookupAndForget: an operator looks up what the gateway
// remembers of a delivery and of an entity, and forgets a delivery: its
// next copy is forwarded again, once.
func TestDedupeLookupAndForget(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		hold := make(chan struct{})
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			if bytes.Contains(body, []byte("r-held")) {
				<-hold
			}
			w.WriteHeader(http.StatusOK)
		})
		g := startGateway(t, freshSite(up.Addr(), ""), gatewayOptions{Global: global})
		s := signer(t, "standard", devSecret)
		id, r := randomID("msg_"), randomID("r-")
		at := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
		body := event("reservation.confirmed", r, at)
		if st, _, got := post(t, g.URL, s.Sign(id, time.Now(), body), body); st != 200 {
			t.Fatalf("first: %d %s", st, got)
		}
		out, err := cli(t, g, "dedupe", "show", id, "--format", "json")
		if err != nil || !strings.Contains(out, `"state": "recorded"`) || !strings.Contains(out, `"status": 200`) || !strings.Contains(out, `"expires_at"`) ||
			!strings.Contains(out, `"fingerprint": "`+dedupe.FingerprintOf(body).String()+`"`) {
			t.Fatalf("dedupe show: %v\n%s", err, out)
		}
		out, err = cli(t, g, "freshness", "show", r, "--format", "json")
		if err != nil || !strings.Contains(out, `"watermark": "`+at.Format(time.RFC3339)) {
			t.Fatalf("freshness show: %v\n%s", err, out)
		}
		if out, err := cli(t, g, "dedupe", "forget", id); err != nil || !strings.Contains(out, "forgotten") {
			t.Fatalf("dedupe forget: %v\n%s", err, out)
		}
		if !strings.Contains(g.logs.String(), `"msg":"dedupe record forgotten`) {
			t.Errorf("no audit line for the forget:\n%s", g.logs.String())
		}
		if out, err := cli(t, g, "dedupe", "show", id, "--format", "json"); err != nil || !strings.Contains(out, `"state": "absent"`) {
			t.Fatalf("dedupe show after forget: %v\n%s", err, out)
		}
		// Forgotten: forwarded again (freshness lets the equal event
		// through), then replayed.
		st, hdr, _ := post(t, g.URL, s.Sign(id, time.Now(), body), body)
		if st != 200 || hdr.Get("Idempotent-Replayed") != "" || up.count() != 2 {
			t.Fatalf("after forget: %d replayed %q upstream %d; want forwarded again", st, hdr.Get("Idempotent-Replayed"), up.count())
		}
		if _, hdr, _ := post(t, g.URL, s.Sign(id, time.Now(), body), body); hdr.Get("Idempotent-Replayed") != "true" || up.count() != 2 {
			t.Fatalf("the copy after: replayed %q upstream %d; want a replay", hdr.Get("Idempotent-Replayed"), up.count())
		}
		if out, err := cli(t, g, "dedupe", "forget", "msg_never_seen"); err == nil || !strings.Contains(out, "holds nothing") {
			t.Errorf("forget of an unknown key: %v\n%s", err, out)
		}

		// A delivery in flight: claimed, with its lease; its entity leased.
		heldID, held := randomID("msg_"), randomID("r-held-")
		heldBody := event("reservation.confirmed", held, at)
		done := make(chan struct{})
		go func() {
			defer close(done)
			post(t, g.URL, s.Sign(heldID, time.Now(), heldBody), heldBody)
		}()
		for deadline := time.Now().Add(10 * time.Second); up.count() < 3; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the held delivery did not reach the upstream")
			}
		}
		out, err = cli(t, g, "dedupe", "show", heldID, "--format", "json")
		if err != nil || !strings.Contains(out, `"state": "claimed"`) || !strings.Contains(out, `"lease_until": "`) ||
			!strings.Contains(out, `"fingerprint": "`+dedupe.FingerprintOf(heldBody).String()+`"`) {
			t.Errorf("dedupe show, in flight: %v\n%s", err, out)
		}
		out, err = cli(t, g, "freshness", "show", held, "--format", "json")
		if err != nil || !strings.Contains(out, `"lease_until": "`) {
			t.Errorf("freshness show, in flight: %v\n%s", err, out)
		}
		close(hold)
		<-done
	})
}

// TestStandardV1aEndToEnd: a gateway holding only the Ed25519 public key
// (whpk_) accepts a request that `hookgate sign` signed with the private
// key (whsk_), and rejects one signed with another key.
func TestStandardV1aEndToEnd(t *testing.T) {
	seed := "VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=" // the reference library's test seed
	raw, _ := base64.StdEncoding.DecodeString(seed)
	pub := base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(raw).Public().(ed25519.PublicKey))
	up := newUpstream(t, nil)
	g := startGateway(t, "webhook_verify {\n\t\tsecret whpk_"+pub+"\n\t}\n\treverse_proxy "+up.Addr(), gatewayOptions{})
	out, err := exec.Command(binary, "sign", "--secret", "whsk_"+seed, "--send", g.URL, `{"a":1}`).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 200 OK") {
		t.Fatalf("signed with whsk_: %v\n%s", err, out)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	out, _ = exec.Command(binary, "sign", "--secret", "whsk_"+base64.StdEncoding.EncodeToString(other.Seed()), "--send", g.URL, `{"a":1}`).CombinedOutput()
	if !strings.HasPrefix(string(out), "HTTP/1.1 401") || !strings.Contains(string(out), "bad_signature") {
		t.Fatalf("signed with another key:\n%s", out)
	}
	if out, err := exec.Command(binary, "sign", "--secret", "whpk_"+pub, `{}`).CombinedOutput(); err == nil || !strings.Contains(string(out), "only verifies") {
		t.Fatalf("sign with a public key: %v\n%s", err, out)
	}
}

// TestGenericHMACEndToEnd: a gateway configured for Box's signature with
// the generic hmac scheme forwards a genuine delivery once (keyed by
// Box's delivery ID) and rejects a changed body.
func TestGenericHMACEndToEnd(t *testing.T) {
	up := newUpstream(t, nil)
	site := `webhook_verify hmac {
		secret SamplePrimaryKey
		hmac {
			id_header BOX-DELIVERY-ID
			timestamp_header BOX-DELIVERY-TIMESTAMP
			signature_header BOX-SIGNATURE-PRIMARY
			algorithm sha256
			encoding base64
			content "{body}{timestamp}"
		}
	}
	webhook_dedupe
	reverse_proxy ` + up.Addr()
	g := startGateway(t, site, gatewayOptions{})
	v, err := verify.New("hmac", []string{"SamplePrimaryKey"}, verify.Options{HMAC: &verify.HMAC{
		IDHeader: "BOX-DELIVERY-ID", TimestampHeader: "BOX-DELIVERY-TIMESTAMP", SignatureHeader: "BOX-SIGNATURE-PRIMARY",
		Encoding: "base64", Content: "{body}{timestamp}",
	}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"webhook_event","trigger":"FILE.UPLOADED"}`)
	h := v.Sign("box-delivery-1", time.Now(), body)
	for i := range 2 {
		st, hdr, got := post(t, g.URL, h, body)
		if st != 200 || (i == 1) != (hdr.Get("Idempotent-Replayed") == "true") {
			t.Fatalf("copy %d: %d %s replayed %q", i+1, st, got, hdr.Get("Idempotent-Replayed"))
		}
	}
	if st, hdr, got := post(t, g.URL, h, append(body, ' ')); st != 401 || problemBody(t, st, hdr, got) != "bad_signature" {
		t.Fatalf("a changed body: %d %s", st, got)
	}
	if up.count() != 1 {
		t.Fatalf("upstream received %d, want 1", up.count())
	}
}

// TestRedisExampleRunsTwiceOnOneMachine runs caddyfiles/redis-two-instances.Caddyfile
// as its header says, twice, configured only by environment variables: a
// delivery sent to one instance is replayed by the other.
func TestRedisExampleRunsTwiceOnOneMachine(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, nil)
	var urls []string
	for range 2 {
		port, admin := freePort(t), freePort(t)
		dir := t.TempDir()
		cmd := exec.Command(binary, "run", "--config", "../caddyfiles/redis-two-instances.Caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir,
			"HOOKGATE_SECRET="+devSecret, "REDIS_URL="+srv.URL(), "UPSTREAM="+up.Addr(),
			fmt.Sprintf("PORT=%d", port), fmt.Sprintf("ADMIN=127.0.0.1:%d", admin))
		logs := new(syncBuffer)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		deadline := time.Now().Add(20 * time.Second)
		for {
			if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
				_ = c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the example did not start:\n%s", logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		urls = append(urls, url)
	}
	s := signer(t, "standard", devSecret)
	body := []byte(`{"a":1}`)
	id := randomID("msg_")
	if st, _, got := post(t, urls[0], s.Sign(id, time.Now(), body), body); st != 200 {
		t.Fatalf("first instance: %d %s", st, got)
	}
	st, hdr, _ := post(t, urls[1], s.Sign(id, time.Now(), body), body)
	if st != 200 || hdr.Get("Idempotent-Replayed") != "true" || up.count() != 1 {
		t.Fatalf("second instance: %d replayed %q upstream %d; want the first's answer replayed", st, hdr.Get("Idempotent-Replayed"), up.count())
	}
}
