package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/hookgate/hookgate/internal/redistest"
)

// secretsKey is a test's secrets_key: the base64 of 32 bytes.
const secretsKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// apiGlobal is a hookgate block for destinations made through the API:
// the sender alone, the secrets key from $KEY, loopback opened to the
// guard (the receiver is a local stand-in).
func apiGlobal(store string) string {
	return fmt.Sprintf(`hookgate {
		%s
		secrets_key {env.KEY}
		allow_networks 127.0.0.0/8
		sender {
			backoff 20ms 200ms
			timeout 1s
			lease 5s
		}
	}`, store)
}

// secretIn is the secret `hookgate destinations create|rotate` printed.
func secretIn(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`secret: (whsec_\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no secret printed:\n%s", out)
	}
	return m[1]
}

// verifies reports whether svix's and standard-webhooks' verifiers both
// accept r under secret (and fails when they disagree).
func verifies(t *testing.T, r recorded, secret string) bool {
	t.Helper()
	sv, _ := svix.NewWebhook(secret)
	swh, _ := standardwebhooks.NewWebhook(secret)
	a, b := sv.Verify(r.Body, r.Header), swh.Verify(r.Body, r.Header)
	if (a == nil) != (b == nil) {
		t.Fatalf("svix says %v, standard-webhooks %v", a, b)
	}
	return a == nil
}

// TestDestinationsAPIOnTwoInstances: two gateways on one Redis. A
// destination created through the CLI on one is applied by the other
// without a reload, and delivers an event published there, signed with
// the secret printed once; a rotation on the second makes both sign (svix's
// and standard-webhooks' verifiers accept under either secret) and an
// expired one the new only; the store holds no secret in the clear; a
// delete on one is applied by the other.
func TestDestinationsAPIOnTwoInstances(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	prefix := redistest.Prefix("api")
	up := newUpstream(t, nil)
	global := apiGlobal(fmt.Sprintf("store redis %s\n\t\tkey_prefix %s", srv.URL(), prefix))
	env := []string{"KEY=" + secretsKey}
	a := startGateway(t, "respond 200", gatewayOptions{Global: global, Env: env})
	b := startGateway(t, "respond 200", gatewayOptions{Global: global, Env: env})

	out, err := cli(t, a, "destinations", "create", "acme", "--url", "http://"+up.Addr()+"/acme", "--events", "seat.*",
		"--header", "X-Customer: acme", "--header", "Authorization: Bearer tok_abc", "--metadata", "plan=gold")
	if err != nil || !strings.HasPrefix(out, "created acme: http://"+up.Addr()+"/acme\n") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	first := secretIn(t, out)
	waitFor(t, "the other instance applies the new destination", func() bool {
		st, _, _ := send(t, http.MethodGet, b.Admin+"/hookgate/destinations/acme", nil, nil)
		return st == 200
	})
	publish := func(g *gateway, id string) recorded {
		t.Helper()
		n := up.count()
		st, _, body := post(t, g.Admin+"/hookgate/events", http.Header{"Content-Type": {"application/json"}},
			[]byte(`{"id":"`+id+`","event_type":"seat.released","payload":{"seat":1}}`))
		if st != 202 || !strings.Contains(string(body), `"destination":"acme","state":"queued","duplicate":false`) {
			t.Fatalf("publish %s on %s: %d %s; want acme among the deliveries", id, g.Admin, st, body)
		}
		waitCount(t, up, n+1)
		return up.received()[n]
	}
	r := publish(b, "evt_1")
	if !verifies(t, r, first) || r.Header.Get("X-Customer") != "acme" || r.Header.Get("Authorization") != "Bearer tok_abc" {
		t.Fatalf("the delivery is not signed with the printed secret or lacks its headers: %v", r.Header)
	}

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	stored, err := rdb.HGetAll(context.Background(), prefix+":{destinations}").Result()
	if err != nil || len(stored) != 1 {
		t.Fatalf("the store holds %v, %v; want acme's record", stored, err)
	}
	if rec := stored["acme"]; strings.Contains(rec, strings.TrimPrefix(first, "whsec_")) || strings.Contains(rec, "tok_abc") || !strings.Contains(rec, "aesgcm:") {
		t.Fatalf("acme's record holds a secret in the clear, or nothing sealed: %s", rec)
	}

	// A rotation on the other instance: both sign until the previous expires.
	out, err = cli(t, b, "destinations", "rotate", "acme", "--expire-previous-after", "1h")
	if err != nil || !strings.HasPrefix(out, "rotated acme: ") || !strings.Contains(out, "the previous secret signs beside it until ") {
		t.Fatalf("rotate: %v\n%s", err, out)
	}
	second := secretIn(t, out)
	waitFor(t, "the first instance applies the rotation", func() bool {
		var v struct {
			Status struct {
				Version string `json:"version"`
			} `json:"status"`
			API struct {
				Version           string `json:"version"`
				PreviousExpiresAt string `json:"previous_expires_at"`
			} `json:"api"`
		}
		_, _, body := send(t, http.MethodGet, a.Admin+"/hookgate/destinations/acme", nil, nil)
		return json.Unmarshal(body, &v) == nil && v.API.PreviousExpiresAt != "" && v.Status.Version == v.API.Version
	})
	r = publish(a, "evt_2")
	if !verifies(t, r, first) || !verifies(t, r, second) {
		t.Fatalf("during the rotation, a verifier refuses one of the secrets: Webhook-Signature %q", r.Header.Get("Webhook-Signature"))
	}
	// A secret of the caller's, from a file (kept out of the process list).
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("whsec_dGhpcmQgc2VjcmV0IG9mIHRoZSBjYWxsZXIncw==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := cli(t, a, "destinations", "rotate", "acme", "--expire-previous-after", "0s", "--secret-file", file); err != nil {
		t.Fatalf("rotate, expiring at once: %v\n%s", err, out)
	} else {
		third := secretIn(t, out)
		if third != "whsec_dGhpcmQgc2VjcmV0IG9mIHRoZSBjYWxsZXIncw==" {
			t.Fatalf("rotate --secret-file: printed %q, want the file's secret", third)
		}
		r = publish(a, "evt_3")
		if verifies(t, r, second) || !verifies(t, r, third) {
			t.Fatalf("after a rotation expiring at once, want the new secret only: Webhook-Signature %q", r.Header.Get("Webhook-Signature"))
		}
	}

	// Its counters carry its name; it has no gauge read at each scrape.
	if m := a.Metrics(); !strings.Contains(m, `hookgate_sender_deliveries_total{destination="acme"`) ||
		strings.Contains(m, `hookgate_sender_queue_depth{destination="acme"`) {
		t.Fatalf("metrics: want acme's deliveries counted and no depth gauge of it:\n%s", m)
	}

	// Secrets appear in no log, and the list says where each was made.
	for _, g := range []*gateway{a, b} {
		if logs := g.logs.String(); strings.Contains(logs, strings.TrimPrefix(first, "whsec_")) || strings.Contains(logs, "tok_abc") {
			t.Fatal("a secret is in the gateway's log")
		}
	}
	if out, err := cli(t, b, "destinations", "list"); err != nil || !regexp.MustCompile(`(?m)^acme\s+api\s+active`).MatchString(out) {
		t.Fatalf("list: %v\n%s", err, out)
	}

	// Deleted on one instance, gone from the other.
	if out, err := cli(t, b, "destinations", "delete", "acme"); err != nil || !strings.Contains(out, "deleted acme") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	waitFor(t, "the other instance applies the delete", func() bool {
		st, _, _ := send(t, http.MethodGet, a.Admin+"/hookgate/destinations/acme", nil, nil)
		return st == 404
	})

	// Made again under the name, it starts afresh: an event delivered to
	// the one deleted is delivered again, under the new secret.
	out, err = cli(t, a, "destinations", "create", "acme", "--url", "http://"+up.Addr()+"/acme", "--events", "seat.*")
	if err != nil {
		t.Fatalf("create again: %v\n%s", err, out)
	}
	again := secretIn(t, out)
	if r := publish(a, "evt_1"); !verifies(t, r, again) {
		t.Fatalf("the event delivered to the deleted acme, published to the new one: not signed with its secret")
	}
}

// TestDestinationsAPIGuardAndRefusals: through the CLI on the embedded
// store: the guard's refusal (422 naming the rule), a static name (409),
// a delete of a destination holding envelopes (409 naming the counts,
// then purge or move); the secrets sealed under secrets_key survive a
// restart, and a gateway started with another key leaves the destination
// out, logged, without losing it.
func TestDestinationsAPIGuardAndRefusals(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(503) })
	global := strings.Replace(apiGlobal("store file"), "sender {", fmt.Sprintf("destination billing {\n\t\t\turl http://%s/billing\n\t\t\tsecret %s\n\t\t}\n\t\tsender {", up.Addr(), devSecret), 1)
	data := t.TempDir()
	g := startGateway(t, "respond 200", gatewayOptions{Global: global, Env: []string{"KEY=" + secretsKey}, DataDir: data})

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "meta", "--url", "http://169.254.169.254/latest/meta-data"}, "metadata address: the SSRF guard refuses it (allow_networks opens it only by its own /32 or /128) (422 destination_not_allowed)"},
		{[]string{"create", "self", "--url", g.URL + "/"}, "the gateway's own listener: the SSRF guard refuses it (422 destination_not_allowed)"},
		{[]string{"create", "admin", "--url", g.Admin + "/stop"}, "the gateway's own listener: the SSRF guard refuses it (422 destination_not_allowed)"},
		{[]string{"create", "billing", "--url", "http://" + up.Addr()}, "configured in the Caddyfile (409 destination_exists)"},
		{[]string{"update", "billing", "--description", "x"}, "destination_static"},
		{[]string{"create", "a/b/c", "--url", "http://" + up.Addr()}, "(400 bad_request)"},
		{[]string{"create", "acme"}, "create needs --url"},
		{[]string{"delete", "nowhere"}, "(404 unknown_destination)"},
	} {
		if out, err := cli(t, g, append([]string{"destinations"}, tc.args...)...); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("hookgate destinations %s: %v\n%s; want a refusal with %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}

	out, err := cli(t, g, "destinations", "create", "acme", "--url", "http://"+up.Addr()+"/acme")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if st, _, body := post(t, g.Admin+"/hookgate/destinations/acme/enqueue", http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"id":"a-1","payload":{"n":1}}`)); st != 202 {
		t.Fatalf("enqueue: %d %s", st, body)
	}
	if out, err := cli(t, g, "destinations", "delete", "acme"); err == nil || !strings.Contains(out, "holds 1 ") || !strings.Contains(out, "destination_not_empty") {
		t.Fatalf("delete of a destination holding an envelope: %v\n%s; want destination_not_empty naming the count", err, out)
	}

	// A restart under the same key keeps it; under another it is left out.
	g.Stop()
	g = startGateway(t, "respond 200", gatewayOptions{Global: global, Env: []string{"KEY=" + secretsKey}, DataDir: data})
	if out, err := cli(t, g, "destinations", "list"); err != nil || !regexp.MustCompile(`(?m)^acme\s+api\s+`).MatchString(out) {
		t.Fatalf("after a restart, list: %v\n%s", err, out)
	}
	g.Stop()
	other := strings.Repeat("B", 43) + "="
	g = startGateway(t, "respond 200", gatewayOptions{Global: global, Env: []string{"KEY=" + other}, DataDir: data})
	if !strings.Contains(g.logs.String(), "an API destination is left out") {
		t.Fatalf("under another key, no line says the destination is left out:\n%s", g.logs.String())
	}
	if out, _ := cli(t, g, "destinations", "list"); !regexp.MustCompile(`(?m)^acme\s+-\s+orphaned`).MatchString(out) {
		t.Fatalf("under another key, list:\n%s; want acme's envelope kept, an orphan's", out)
	}
	if out, err := cli(t, g, "destinations", "update", "acme", "--description", "x"); err == nil || !strings.Contains(out, "(409 destination_unreadable)") {
		t.Fatalf("under another key, update: %v\n%s; want destination_unreadable", err, out)
	}
	if out, err := cli(t, g, "destinations", "delete", "acme"); err == nil || !strings.Contains(out, "holds 1 queued") {
		t.Fatalf("under another key, delete: %v\n%s; want it counted as the store holds it", err, out)
	}
	g.Stop()
	g = startGateway(t, "respond 200", gatewayOptions{Global: global, Env: []string{"KEY=" + secretsKey}, DataDir: data})
	if out, err := cli(t, g, "destinations", "delete", "acme", "--envelopes", "move:billing"); err != nil || !strings.Contains(out, "deleted acme: 1 envelope moved\n") {
		t.Fatalf("delete, moving the envelope: %v\n%s", err, out)
	}
	if out, _ := cli(t, g, "destinations", "list"); strings.Contains(out, "acme") {
		t.Fatalf("after the delete, list:\n%s", out)
	}
}
