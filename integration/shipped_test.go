package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hookgate/hookgate/internal/redistest"
)

// shipped is a shipped config, run as it ships with its secrets in the
// environment.
type shipped struct {
	t       *testing.T
	dir     string
	port    int // the gateway's
	metrics int // the metrics listener's, 0 if none
	logs    *syncBuffer
	secrets []string // what no log line may hold
	stop    func()   // stops it (SIGTERM) and waits; once
}

// randomSecret is 24 random bytes: never the public development secret,
// and found in a log only if the log leaked it. After the prefix whsec_,
// base64 (a signing secret); else hex (a password in a URL).
func randomSecret(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	if prefix == "whsec_" {
		return prefix + base64.RawStdEncoding.EncodeToString(b)
	}
	return prefix + hex.EncodeToString(b)
}

// runShipped runs hookgate with the Caddyfile text in env, and waits
// until GET /healthz on port answers.
func runShipped(t *testing.T, caddyfile string, port, metrics int, env []string, secrets []string) *shipped {
	t.Helper()
	s := &shipped{t: t, dir: t.TempDir(), port: port, metrics: metrics, logs: new(syncBuffer), secrets: secrets}
	path := filepath.Join(s.dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+s.dir, "XDG_CONFIG_HOME="+s.dir, "HOME="+s.dir, "CADDY_ADMIN="+s.adminSocket()+"|0600")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.stop = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("hookgate logs:\n%s", s.logs)
		}
	})
	waitFor(t, "the shipped config to serve /healthz", func() bool {
		select {
		case <-done:
			t.Fatalf("hookgate exited:\n%s", s.logs)
		default:
		}
		resp, err := http.Get(s.url("/healthz"))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// adminSocket is the admin socket's address, without its mode.
func (s *shipped) adminSocket() string { return "unix/" + filepath.Join(s.dir, "admin.sock") }

func (s *shipped) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", s.port, path) }

// checkLogs stops the gateway, so that every line is written (Caddy logs
// a failed request after answering it), then fails the test for every
// secret, and every signature of the headers sent, found in the logs; and
// unless the logs show the upstream's failure with the request that met
// it, which the check is about.
func (s *shipped) checkLogs(sent []http.Header) {
	s.t.Helper()
	s.stop()
	logs := s.logs.String()
	if !strings.Contains(logs, `"logger":"http.log.error`) || !strings.Contains(logs, `"headers":{`) {
		s.t.Errorf("the logs hold no failed request with its headers: the check proves nothing")
	}
	needles := append([]string(nil), s.secrets...)
	for _, h := range sent {
		for name, values := range h {
			lower := strings.ToLower(name)
			if !strings.Contains(lower, "signature") && !strings.Contains(lower, "hmac") {
				continue
			}
			for _, v := range values {
				needles = append(needles, v)
				// The MAC itself, without its scheme's prefixes.
				for _, part := range regexp.MustCompile(`[ ,=]+`).Split(v, -1) {
					if len(part) >= 16 {
						needles = append(needles, part)
					}
				}
			}
		}
	}
	for _, n := range needles {
		if strings.Contains(logs, n) {
			s.t.Errorf("the logs hold a secret or signature, %.12s…", n)
		}
	}
}

// checkAdminSocket: the admin API is the socket CADDY_ADMIN names, mode
// 0600, and answers there.
func (s *shipped) checkAdminSocket() {
	s.t.Helper()
	path := strings.TrimPrefix(s.adminSocket(), "unix/")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		s.t.Errorf("the admin socket %s: %v %v; want a socket of mode 0600", path, fi, err)
		return
	}
	out, err := exec.Command(binary, "dlq", "summary", "--address", s.adminSocket()+"|0600").CombinedOutput()
	// No destination: the sender's 404 answers from the admin API.
	if !strings.Contains(string(out), "no_sender") && err != nil {
		s.t.Errorf("hookgate dlq summary over the socket: %v\n%s", err, out)
	}
}

// scrape is the metrics listener's answer.
func (s *shipped) scrape() string {
	s.t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", s.metrics))
	if err != nil {
		s.t.Fatalf("the metrics listener: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// deliver sends a signed copy of body, and expects the gateway's answer to
// the upstream's failure: 502.
func (s *shipped) deliver(h http.Header, body []byte) {
	s.t.Helper()
	if st, _, got := post(s.t, s.url("/hooks"), h, body); st != http.StatusBadGateway {
		s.t.Errorf("a signed delivery to a failing upstream: %d %s, want 502", st, got)
	}
}

// unitEnv is the systemd unit's Environment= settings.
func unitEnv(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("../deploy/systemd/hookgate.service")
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for line := range strings.Lines(string(src)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Environment="); ok {
			for kv := range strings.FieldsSeq(rest) {
				env = append(env, strings.Trim(kv, `"`))
			}
		}
	}
	return env
}

// TestShippedConfigsKeepSecretsOutOfLogs runs each shipped config (the
// container image's Caddyfile, under each scheme it can select; the same
// under the systemd unit's environment; the Kubernetes ConfigMap's; and
// caddyfiles/meta.Caddyfile, whose handshake carries a token in its
// query) in front of an upstream that fails, sends it signed deliveries,
// and finds no secret, token, password or signature in any log line. It
// also checks each binds its admin API to a 0600 socket, and serves the
// metrics on a port of its own.
func TestShippedConfigsKeepSecretsOutOfLogs(t *testing.T) {
	failing := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // nothing listens there
	body := []byte(`{"id":"evt_shipped","event_id":"Ev_shipped","type":"reservation.confirmed","reservation_id":"r-1"}`)
	image, err := os.ReadFile("../deploy/container/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}

	// The schemes the image's comment lists, each verified with the one
	// secret.
	m := regexp.MustCompile(`(?s)HOOKGATE_SCHEME\s+the signature scheme.*?: (standard \(the default\), .*?) \(see`).FindSubmatch(image)
	if m == nil {
		t.Fatal("the image's Caddyfile lists no schemes for HOOKGATE_SCHEME")
	}
	list := strings.NewReplacer("#", "", "(the default)", "", " or ", ",", "\n", " ").Replace(string(m[1]))
	var schemes []string
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			schemes = append(schemes, s)
		}
	}
	if len(schemes) < 8 {
		t.Fatalf("schemes %q from the image's comment: want every scheme it can select", schemes)
	}
	for _, scheme := range schemes {
		t.Run("image/"+scheme, func(t *testing.T) {
			secret := randomSecret(t, "whsec_")
			port, metrics := freePort(t), freePort(t)
			s := runShipped(t, string(image), port, metrics, []string{
				"HOOKGATE_SECRET=" + secret, "HOOKGATE_UPSTREAM=" + failing, "HOOKGATE_SCHEME=" + scheme,
				fmt.Sprintf("HOOKGATE_PORT=%d", port), fmt.Sprintf("HOOKGATE_METRICS_PORT=%d", metrics),
			}, []string{secret, strings.TrimPrefix(secret, "whsec_")})
			h := signer(t, scheme, secret).Sign("msg_shipped", time.Now(), body)
			s.deliver(h, body)
			if scheme == "standard" {
				s.checkAdminSocket()
				if scrape := s.scrape(); !strings.Contains(scrape, `hookgate_verify_requests_total{result="accepted",scheme="standard"} 1`) {
					t.Errorf("the metrics lack the accepted request:\n%.3000s", scrape)
				}
			}
			s.checkLogs([]http.Header{h})
		})
	}

	t.Run("systemd", func(t *testing.T) {
		secret := randomSecret(t, "whsec_")
		port, metrics := freePort(t), freePort(t)
		var env []string
		for _, kv := range unitEnv(t) {
			if k, _, _ := strings.Cut(kv, "="); k != "CADDY_ADMIN" && !strings.HasPrefix(k, "XDG_") && k != "HOME" {
				env = append(env, kv)
			}
		}
		env = append(env, "HOOKGATE_SECRET="+secret, "HOOKGATE_UPSTREAM="+failing,
			fmt.Sprintf("HOOKGATE_PORT=%d", port), fmt.Sprintf("HOOKGATE_METRICS_PORT=%d", metrics))
		s := runShipped(t, string(image), port, metrics, env, []string{secret, strings.TrimPrefix(secret, "whsec_")})
		h := signer(t, "standard", secret).Sign("msg_shipped", time.Now(), body)
		s.deliver(h, body)
		s.checkAdminSocket()
		s.checkLogs([]http.Header{h})
	})

	t.Run("kubernetes", func(t *testing.T) {
		src, err := os.ReadFile("../deploy/kubernetes/configmap.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(src, &cm); err != nil {
			t.Fatal(err)
		}
		redisPass, truthPass, enrollPass := randomSecret(t, "r"), randomSecret(t, "t"), randomSecret(t, "e")
		rdb := redistest.StartWith(t, "--user", "default", "on", "nopass", "~*", "&*", "+@all",
			"--user", "hookgate", "on", ">"+redisPass, "~*", "&*", "+@all")
		port, metrics := freePort(t), freePort(t)
		// The ConfigMap's ports, moved to free ones.
		caddyfile := strings.NewReplacer(":8080 {", fmt.Sprintf(":%d {", port), "127.0.0.1:8080/", fmt.Sprintf("127.0.0.1:%d/", port),
			":9180 {", fmt.Sprintf(":%d {", metrics)).Replace(cm.Data["Caddyfile"])
		secret := randomSecret(t, "whsec_")
		s := runShipped(t, caddyfile, port, metrics, []string{
			"HOOKGATE_SECRET=" + secret, "HOOKGATE_UPSTREAM=" + failing,
			"REDIS_URL=redis://hookgate:" + redisPass + "@" + rdb.Addr() + "/0",
			"TRUTH_DSN=postgres://reconcile:" + truthPass + "@" + failing + "/truth",
			"ENROLL_DSN=postgres://reconcile:" + enrollPass + "@" + failing + "/enroll",
		}, []string{secret, strings.TrimPrefix(secret, "whsec_"), redisPass, truthPass, enrollPass})
		h := signer(t, "standard", secret).Sign("msg_shipped", time.Now(), body)
		s.deliver(h, body)
		s.checkAdminSocket()
		// The shipped alerts' series are scraped from the metrics port: the
		// scheduled reconcile's and the sender's among them.
		scrape := s.scrape()
		for _, series := range []string{`hookgate_reconcile_period_seconds{job="enrollments"} 900`, `hookgate_sender_queue_depth{destination="receiver",state="queued"}`, `hookgate_dedupe_requests_total{`} {
			if !strings.Contains(scrape, series) {
				t.Errorf("the metrics port does not serve %s:\n%.3000s", series, scrape)
			}
		}
		s.checkLogs([]http.Header{h})
	})

	t.Run("meta", func(t *testing.T) {
		src, err := os.ReadFile("../caddyfiles/meta.Caddyfile")
		if err != nil {
			t.Fatal(err)
		}
		port := freePort(t)
		caddyfile := strings.NewReplacer(":8080 {", fmt.Sprintf(":%d {", port), ":9090 {", fmt.Sprintf(":%d {", freePort(t))).Replace(string(src))
		appSecret, token := randomSecret(t, "m"), randomSecret(t, "v")
		s := runShipped(t, caddyfile, port, 0, []string{
			"META_APP_SECRET=" + appSecret, "META_VERIFY_TOKEN=" + token, "META_UPSTREAM=" + failing,
		}, []string{appSecret, token})
		for _, tc := range []struct {
			token string
			want  int
		}{{token, http.StatusOK}, {token + "x", http.StatusForbidden}} {
			q := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {tc.token}, "hub.challenge": {"c-42"}}
			if st, _, got := send(t, http.MethodGet, s.url("/?"+q.Encode()), nil, nil); st != tc.want {
				t.Errorf("the handshake: %d %s, want %d", st, got, tc.want)
			}
		}
		h := signer(t, "meta", appSecret).Sign("", time.Now(), body)
		s.deliver(h, body)
		s.checkLogs([]http.Header{h})
		// The access log did log the handshakes, without the token.
		if n := strings.Count(s.logs.String(), `"uri":"/?hub.challenge=c-42&hub.mode=subscribe"`); n != 2 {
			t.Errorf("the access log holds %d handshakes with the token left out, want 2", n)
		}
	})
	if t.Failed() {
		return
	}
	if bytes.Contains(image, []byte("localhost:2019")) {
		t.Error("the image's Caddyfile names a TCP admin address")
	}
}
