package integration

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/google/go-cmp/cmp"

	_ "github.com/hookgate/hookgate/caddymodule"
)

var update = flag.Bool("update", false, "rewrite the adapt goldens under testdata/adapt")

func adapt(t *testing.T, caddyfile []byte) ([]byte, error) {
	t.Helper()
	adapter := caddyconfig.GetAdapter("caddyfile")
	out, warnings, err := adapter.Adapt(caddyfile, map[string]any{"filename": "Caddyfile"})
	for _, w := range warnings {
		t.Logf("warning: %s", w.String())
	}
	if err != nil {
		return nil, err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, out, "", "\t"); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	return pretty.Bytes(), nil
}

// TestAdaptExamples adapts every Caddyfile under caddyfiles/ and compares
// the JSON with its golden under testdata/adapt (go test -update rewrites).
func TestAdaptExamples(t *testing.T) {
	files, err := filepath.Glob("../caddyfiles/*.Caddyfile")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Caddyfiles found: %v", err)
	}
	// The examples take ports, addresses and secrets from the environment,
	// with defaults: adapt with every variable they read unset, so the
	// goldens hold the defaults whatever the caller's environment.
	unset := func(name string) {
		t.Setenv(name, "")
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
	}
	for _, env := range os.Environ() {
		if name, _, _ := strings.Cut(env, "="); strings.HasPrefix(name, "HOOKGATE_") {
			unset(name)
		}
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\{\$([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(string(src), -1) {
			unset(m[1])
		}
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".Caddyfile")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := adapt(t, src)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			golden := filepath.Join("testdata", "adapt", name+".json")
			if *update {
				// A golden is checked in: it takes the repository's usual modes.
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil { //nolint:gosec // G301: see above
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil { //nolint:gosec // G306: see above
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./integration -run TestAdaptExamples -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("adapted JSON differs from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestExamplesMountHealth: every example with a site mounts webhook_health
// at /healthz, as docs/deploy.md's "Readiness" says: a top-level route of a
// server that matches the path /healthz and holds the handler, with no
// route before it that runs webhook_verify (which would ask the probe for
// a signature).
func TestExamplesMountHealth(t *testing.T) {
	files, err := filepath.Glob("../caddyfiles/*.Caddyfile")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Caddyfiles found: %v", err)
	}
	type route struct {
		Match []struct {
			Path []string `json:"path"`
		} `json:"match"`
		Handle json.RawMessage `json:"handle"`
	}
	var config struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []route `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	holds := func(raw json.RawMessage, handler string) bool {
		return bytes.Contains(raw, []byte(`"handler":"`+handler+`"`))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".Caddyfile"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			out, err := adapt(t, src)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, out); err != nil {
				t.Fatal(err)
			}
			config.Apps.HTTP.Servers = nil
			if err := json.Unmarshal(compact.Bytes(), &config); err != nil {
				t.Fatal(err)
			}
			if len(config.Apps.HTTP.Servers) == 0 {
				t.Skip("no site")
			}
			for _, srv := range config.Apps.HTTP.Servers {
				for _, r := range srv.Routes {
					if holds(r.Handle, "webhook_verify") {
						break // the probe would be asked for a signature
					}
					if len(r.Match) == 1 && slices.Equal(r.Match[0].Path, []string{"/healthz"}) && holds(r.Handle, "webhook_health") {
						return
					}
				}
			}
			t.Errorf("%s mounts no webhook_health at /healthz in a handle of its own, ahead of webhook_verify:\n%s", file, out)
		})
	}
}

// TestAdaptOrder checks the registered directive order: written in any
// order, the webhook handlers run before reverse_proxy, without a route block.
func TestAdaptOrder(t *testing.T) {
	got, err := adapt(t, []byte(`:8080 {
	reverse_proxy 127.0.0.1:9
	webhook_freshness {
		entity {webhook.json.id}
		sequence {webhook.json.seq}
	}
	request_header X-A b
	webhook_dedupe
	webhook_verify github {
		secret s
	}
	encode gzip
}`))
	if err != nil {
		t.Fatal(err)
	}
	order := []string{`"handler": "webhook_verify"`, `"handler": "headers"`, `"handler": "encode"`, `"handler": "webhook_dedupe"`, `"handler": "webhook_freshness"`, `"handler": "reverse_proxy"`}
	s := string(got)
	last := -1
	for _, h := range order {
		i := strings.Index(s, h)
		if i < 0 || i < last {
			t.Fatalf("handler %s out of order in:\n%s", h, s)
		}
		last = i
	}
}

// TestAdaptErrors checks that bad Caddyfile input fails with a precise error.
func TestAdaptErrors(t *testing.T) {
	tests := []struct{ name, caddyfile, want string }{
		{"unknown subdirective", ":80 {\n webhook_verify {\n  secrett s\n }\n}", `unknown webhook_verify subdirective "secrett"`},
		{"scheme twice", ":80 {\n webhook_verify github {\n  scheme stripe\n  secret s\n }\n}", "scheme given twice"},
		{"bad tolerance", ":80 {\n webhook_verify {\n  tolerance soon\n }\n}", "tolerance"},
		{"zero tolerance", ":80 {\n webhook_verify {\n  tolerance 0\n }\n}", "tolerance must be positive"},
		{"zero future tolerance", ":80 {\n webhook_verify {\n  tolerance 5m 0s\n }\n}", "tolerance must be positive"},
		{"too many tolerances", ":80 {\n webhook_verify {\n  tolerance 1m 2m 3m\n }\n}", "wrong argument count"},
		{"bad size", ":80 {\n webhook_verify {\n  max_body lots\n }\n}", "max_body"},
		{"hmac unknown field", ":80 {\n webhook_verify hmac {\n  hmac {\n   signature x\n  }\n }\n}", `unknown hmac subdirective "signature"`},
		{"secret without value", ":80 {\n webhook_verify {\n  secret\n }\n}", "wrong argument count"},
		{"two inline schemes", ":80 {\n webhook_verify github stripe\n}", "wrong argument count"},
		{"rfc9421 secret without keyid", ":80 {\n webhook_verify rfc9421 {\n  secret whsec_a2V5\n }\n}", "want secret <keyid> <key>"},
		{"rfc9421 after its secrets", ":80 {\n webhook_verify {\n  secret k whsec_a2V5\n  scheme rfc9421\n }\n}", "scheme rfc9421 must come before its secrets"},
		{"url twice", ":80 {\n webhook_verify twilio {\n  url a\n  url b\n }\n}", "url given twice"},
		{"cloudevents_origins empty", ":80 {\n webhook_verify {\n  cloudevents_origins\n }\n}", "wrong argument count"},
		{"topics empty", ":80 {\n webhook_verify sns {\n  topics\n }\n}", "wrong argument count"},
		{"confirm_subscriptions with an argument", ":80 {\n webhook_verify sns {\n  topics arn:aws:sns:a:1:t\n  confirm_subscriptions yes\n }\n}", "wrong argument count"},
		{"destination bad guard", "{\n hookgate {\n  destination d {\n   url http://x\n   secret s\n   guard maybe\n  }\n }\n}\n:80", `guard "maybe": want on or off`},
		{"allow_networks twice", "{\n hookgate {\n  allow_networks 10.0.0.0/8\n  allow_networks 10.1.0.0/16\n }\n}\n:80", "allow_networks given twice"},
		{"audience twice", ":80 {\n webhook_verify pubsub {\n  audience a\n  audience b\n }\n}", "audience given twice"},
		{"dedupe unknown subdirective", ":80 {\n webhook_dedupe {\n  leese 1s\n }\n}", `unknown webhook_dedupe subdirective "leese"`},
		{"dedupe bad in_flight", ":80 {\n webhook_dedupe {\n  in_flight wait\n }\n}", "in_flight: want wait <duration>, or reject"},
		{"dedupe record 5xx", ":80 {\n webhook_dedupe {\n  record 2xx 5xx\n }\n}", "a server error is never final"},
		{"dedupe record bad class", ":80 {\n webhook_dedupe {\n  record 200\n }\n}", `record "200"`},
		{"dedupe bad store error", ":80 {\n webhook_dedupe {\n  on_store_error ignore\n }\n}", `on_store_error "ignore"`},
		{"dedupe negative lease", ":80 {\n webhook_dedupe {\n  lease 0s\n }\n}", "lease: want a positive duration"},
		{"dedupe twice", ":80 {\n webhook_dedupe {\n  lease 1s\n  lease 2s\n }\n}", "lease given twice"},
		{"dedupe bad replay_cache", ":80 {\n webhook_dedupe {\n  replay_cache lots\n }\n}", "replay_cache: want a positive number of entries, or off"},
		{"dedupe inline arg", ":80 {\n webhook_dedupe x\n}", "wrong argument count"},
		{"freshness without entity", ":80 {\n webhook_freshness {\n  event_time {webhook.json.at}\n }\n}", "entity is required"},
		{"freshness time and sequence", ":80 {\n webhook_freshness {\n  entity e\n  event_time t\n  sequence s\n }\n}", "exactly one of event_time and sequence"},
		{"freshness neither", ":80 {\n webhook_freshness {\n  entity e\n }\n}", "exactly one of event_time and sequence"},
		{"freshness max_age with sequence", ":80 {\n webhook_freshness {\n  entity e\n  sequence s\n  max_age 1h\n }\n}", "max_age judges event times"},
		{"freshness bad on_stale", ":80 {\n webhook_freshness {\n  entity e\n  event_time t\n  on_stale drop\n }\n}", `on_stale "drop"`},
		{"freshness bad entity_busy", ":80 {\n webhook_freshness {\n  entity e\n  event_time t\n  entity_busy wait\n }\n}", "entity_busy: want wait <duration>, or reject"},
		{"freshness unknown", ":80 {\n webhook_freshness {\n  entity e\n  event_time t\n  maxage 1h\n }\n}", `unknown webhook_freshness subdirective "maxage"`},
		{"freshness bad duration", ":80 {\n webhook_freshness {\n  entity e\n  event_time t\n  max_age soon\n }\n}", "max_age: want a positive duration"},
		{"unknown store", "{\n hookgate {\n  store etcd x\n }\n}\n:80", `unknown store backend "etcd"`},
		{"store twice", "{\n hookgate {\n  store file\n  store file\n }\n}\n:80", "store given twice"},
		{"redis without url", "{\n hookgate {\n  store redis\n }\n}\n:80", "at least one"},
		{"unknown option", "{\n hookgate {\n  stor file\n }\n}\n:80", `unknown hookgate subdirective "stor"`},
		{"reconcile without a receiver", "{\n hookgate {\n  reconcile j {\n   truth postgres x \"SELECT 1\"\n   expect a b\n  }\n }\n}\n:80", "needs a truth and a receiver"},
		{"reconcile bad source", "{\n hookgate {\n  reconcile j {\n   truth mysql x y\n  }\n }\n}\n:80", "want postgres <dsn> <query>, or http <url>"},
		{"console inline arg", ":80 {\n webhook_console x\n}", "wrong argument count"},
		{"console unknown subdirective", ":80 {\n webhook_console {\n  scope a\n }\n}", `unknown webhook_console subdirective "scope"`},
		{"console bad max_redrive", ":80 {\n webhook_console {\n  max_redrive 0\n }\n}", "max_redrive: want a positive whole number"},
		{"console destination twice", ":80 {\n webhook_console {\n  destination a\n  destination b\n }\n}", "destination given twice"},
		{"destination events without a glob", "{\n hookgate {\n  destination d {\n   url http://127.0.0.1:1\n   secret s\n   events\n  }\n }\n}\n:80", "events needs at least one event type glob"},
		{"destination events twice", "{\n hookgate {\n  destination d {\n   events a.*\n   events b.*\n  }\n }\n}\n:80", "events given twice"},
		{"sender bad history", "{\n hookgate {\n  sender {\n   history 0\n  }\n }\n}\n:80", "history: want a positive duration"},
		{"sender bad history_payload", "{\n hookgate {\n  sender {\n   history_payload -1h\n  }\n }\n}\n:80", "history_payload: want a duration of 0 or more"},
		{"sender history twice", "{\n hookgate {\n  sender {\n   history 1h\n   history 2h\n  }\n }\n}\n:80", "history given twice"},
		{"enqueue two destinations", ":80 {\n webhook_enqueue a b\n}", "wrong argument count"},
		{"reconcile without expect", "{\n hookgate {\n  reconcile j {\n   truth postgres x y\n   receiver http http://h\n  }\n }\n}\n:80", "needs at least one expect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, []byte(tt.caddyfile))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("adapt error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestValidateErrors checks errors found when the config loads (`hookgate
// validate`): they name the problem and never echo a secret.
func TestValidateErrors(t *testing.T) {
	tests := []struct{ name, site, want string }{
		{"unknown scheme", "webhook_verify paypal {\n secret s3cr3t-value\n}", `unknown scheme \"paypal\"`},
		{"no secret", "webhook_verify github", "at least one secret"},
		{"verify_token without meta", "webhook_verify github {\n secret s\n verify_token t0k3n\n}", "verify_token is Meta's handshake token: it needs scheme meta, not github"},
		{"sender lease under two timeouts", "webhook_verify github {\n secret s\n}", "must be at least twice the timeout"},
		{"hmac without its block", "webhook_verify hmac {\n secret s\n}", "scheme hmac needs its configuration"},
		{"hmac bad algorithm", "webhook_verify hmac {\n secret s\n hmac {\n  signature_header X-Sig\n  algorithm md5\n }\n}", `algorithm \"md5\"`},
		{"standard secret not base64", "webhook_verify {\n secret whsec_s3cr3t-value!!\n}", "base64"},
		{"dedupe lease under 1s", "webhook_dedupe {\n lease 500ms\n}", "under 1s"},
		{"dedupe retention under lease", "webhook_dedupe {\n lease 1m\n retention 30s\n}", "shorter than the lease"},
		{"redis URL with a bad escape", "webhook_verify github {\n secret s\n}", "does not parse"},
		{"redis URL not redis", "webhook_verify github {\n secret s\n}", "is not a Redis URL"},
		{"redis URL with a password option", "webhook_verify github {\n secret s\n}", "unexpected option: password"},
		{"redis URL with a token as user", "webhook_verify github {\n secret s\n}", "invalid URL path"},
		{"redis URL with a bad option value", "webhook_verify github {\n secret s\n}", "invalid dial_timeout"},
		{"console without a sender", "webhook_console", "no sender to show"},
		{"console of an unknown destination", "webhook_console {\n destination nowhere\n}", `destination \"nowhere\" is not configured`},
		{"fan-out without event_type", "webhook_enqueue", "it needs event_type"},
		{"fan-out without a subscriber", "webhook_enqueue {\n event_type {webhook.json.type}\n}", "no destination of the hookgate global option subscribes to any"},
		{"events that are not a glob", "webhook_enqueue d", "is not a glob"},
		{"history_payload over history", "webhook_enqueue d", "history_payload: 2h0m0s is longer than the history, 1h0m0s"},
		{"empty env secret", "webhook_verify github {\n secret {env.HOOKGATE_TEST_UNSET}\n}", "{env.HOOKGATE_TEST_UNSET} is empty"},
		{"braces in a literal secret", "webhook_verify github {\n secret abc{s3cr3t-value}\n}", "secret 1: it holds text in braces that is not a placeholder"},
		{"a literal secret in braces", "webhook_verify github {\n secret {s3cr3t-value}\n}", "secret 1: it holds text in braces that is not a placeholder"},
		{"braces in a verify_token", "webhook_verify meta {\n secret s\n verify_token {s3cr3t-value}\n}", "verify_token: it holds text in braces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "Caddyfile")
			global := ""
			switch tt.name {
			case "redis URL with a bad escape":
				global = "hookgate {\n store redis redis://:s3cr3t-value%zz@127.0.0.1:6379\n }\n"
			case "redis URL not redis":
				global = "hookgate {\n store redis http://:s3cr3t-value@127.0.0.1:6379\n }\n"
			case "console of an unknown destination":
				global = "hookgate {\n destination d {\n  url http://127.0.0.1:1\n  secret whsec_c2VjcmV0LWZvci10ZXN0cy1vbmx5\n }\n }\n"
			case "fan-out without event_type", "events that are not a glob":
				global = "hookgate {\n destination d {\n  url http://127.0.0.1:1\n  secret whsec_c2VjcmV0LWZvci10ZXN0cy1vbmx5\n  events reservation.[\n }\n }\n"
				if tt.name == "fan-out without event_type" {
					global = strings.Replace(global, "reservation.[", "reservation.*", 1)
				}
			case "history_payload over history":
				global = "hookgate {\n sender {\n  history 1h\n  history_payload 2h\n }\n destination d {\n  url http://127.0.0.1:1\n  secret whsec_c2VjcmV0LWZvci10ZXN0cy1vbmx5\n }\n }\n"
			case "fan-out without a subscriber":
				global = "hookgate {\n destination d {\n  url http://127.0.0.1:1\n  secret whsec_c2VjcmV0LWZvci10ZXN0cy1vbmx5\n }\n }\n"
			case "sender lease under two timeouts":
				global = "hookgate {\n sender {\n  timeout 10s\n  lease 15s\n }\n destination d {\n  url http://127.0.0.1:1\n  secret whsec_c2VjcmV0LWZvci10ZXN0cy1vbmx5\n }\n }\n"
			case "redis URL with a password option":
				global = "hookgate {\n store redis redis://127.0.0.1:6379/0?password=s3cr3t-value\n }\n"
			case "redis URL with a token as user":
				global = "hookgate {\n store redis redis://s3cr3t-value@127.0.0.1:6379/0/1\n }\n"
			case "redis URL with a bad option value":
				global = "hookgate {\n store redis redis://:s3cr3t-value@127.0.0.1:6379/0?dial_timeout=s3cr3t-value\n }\n"
			}
			if err := os.WriteFile(path, []byte("{\n admin off\n"+global+"}\n:0 {\n"+tt.site+"\n}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(binary, "validate", "--config", path, "--adapter", "caddyfile").CombinedOutput()
			if err == nil {
				t.Fatalf("validate succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("validate output lacks %q:\n%s", tt.want, out)
			}
			if strings.Contains(string(out), "s3cr3t-value") {
				t.Errorf("validate output holds the secret:\n%s", out)
			}
		})
	}
}

// TestExamplesKeepSecretsOutOfConfig: with every variable set, adapting an
// example prints no secret (they are {env.*} placeholders, read when the
// config loads), and a running gateway's GET /config/ holds the
// placeholder, not the value.
func TestExamplesKeepSecretsOutOfConfig(t *testing.T) {
	const sentinel = "whsec_c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1sZWFr"
	files, _ := filepath.Glob("../caddyfiles/*.Caddyfile")
	for _, file := range files {
		cmd := exec.Command(binary, "adapt", "--config", file)
		cmd.Env = append(os.Environ(), "HOOKGATE_SECRET="+sentinel, "REDIS_URL=redis://:"+sentinel+"x@127.0.0.1:1/0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("adapt %s: %v\n%s", file, err, out)
		}
		if strings.Contains(string(out), "c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1sZWFr") {
			t.Errorf("adapt %s prints a secret:\n%s", file, out)
		}
	}
	up := newUpstream(t, nil)
	g := startGateway(t, "webhook_verify {\n\t\tsecret {env.HOOKGATE_SECRET}\n\t}\n\treverse_proxy "+up.Addr(),
		gatewayOptions{Env: []string{"HOOKGATE_SECRET=" + sentinel}})
	resp, err := http.Get(g.Admin + "/config/")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), sentinel) || !strings.Contains(string(b), "{env.HOOKGATE_SECRET}") {
		t.Errorf("GET /config/ shows the secret, or not the placeholder:\n%s", b)
	}
	body := []byte(`{}`)
	if st, _, got := post(t, g.URL, signer(t, "standard", sentinel).Sign("msg_env", time.Now(), body), body); st != 200 {
		t.Errorf("a request signed with the env secret: %d %s", st, got)
	}
}

// TestDevSecretWarns: a gateway on the README's public development secret
// says so at start.
func TestDevSecretWarns(t *testing.T) {
	up := newUpstream(t, nil)
	g := startGateway(t, "webhook_verify {\n\t\tsecret {env.HOOKGATE_SECRET}\n\t}\n\treverse_proxy "+up.Addr(),
		gatewayOptions{Env: []string{"HOOKGATE_SECRET=" + devSecret}})
	if !strings.Contains(g.logs.String(), "public development secret") {
		t.Errorf("no warning about the development secret:\n%s", g.logs.String())
	}

	// A destination that signs with it: warned too, by name.
	global := fmt.Sprintf("hookgate {\n\t\tstore file %s\n\t\tdestination billing {\n\t\t\turl %s\n\t\t\tsecret {env.HOOKGATE_SECRET}\n\t\t}\n\t}",
		t.TempDir(), up.URL)
	g = startGateway(t, "respond 200", gatewayOptions{Global: global, Env: []string{"HOOKGATE_SECRET=" + devSecret}})
	if logs := g.logs.String(); !strings.Contains(logs, "destination signs with the public development secret") || !strings.Contains(logs, `"destination":"billing"`) {
		t.Errorf("no warning about the destination's development secret:\n%s", logs)
	}
	if strings.Contains(g.logs.String(), devSecret) {
		t.Error("the logs print the secret")
	}
}

// TestProvidersDocAdapts adapts each provider's Caddyfile lines in
// docs/providers.md inside a site, and checks the JSON names the
// provider's scheme: a documented subdirective that webhook_verify does
// not know fails here.
func TestProvidersDocAdapts(t *testing.T) {
	doc, err := os.ReadFile("../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```caddyfile\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 40 {
		t.Fatalf("docs/providers.md has %d Caddyfile blocks, want one per provider", len(blocks))
	}
	for _, b := range blocks {
		scheme := regexp.MustCompile(`webhook_verify (\S+)`).FindStringSubmatch(b[1])
		if scheme == nil {
			t.Errorf("a block without webhook_verify:\n%s", b[1])
			continue
		}
		t.Run(scheme[1], func(t *testing.T) {
			out, err := adapt(t, []byte(":8080 {\n"+b[1]+"\nrespond 200\n}\n"))
			if err != nil {
				t.Fatalf("adapt:\n%s\n%v", b[1], err)
			}
			if !bytes.Contains(out, []byte(`"scheme": "`+scheme[1]+`"`)) {
				t.Fatalf("the JSON does not name scheme %s:\n%s", scheme[1], out)
			}
		})
	}
}
