package destinations

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/internal/replicas"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/verify"
)

// backends runs fn on each backend: the bbolt file and a real Redis.
func backends(t *testing.T, fn func(t *testing.T, newBackend func() Backend)) {
	t.Run("bolt", func(t *testing.T) {
		db := bolttest.Open(t, nil)
		fn(t, func() Backend { return NewBolt(db) })
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		prefix := redistest.Prefix("dests")
		fn(t, func() Backend {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			return NewRedis(rdb, prefix)
		})
	})
}

func TestBackend(t *testing.T) {
	backends(t, func(t *testing.T, newBackend func() Backend) {
		b, ctx := newBackend(), t.Context()
		if v, err := b.Version(ctx); err != nil || v != 0 {
			t.Fatalf("Version() of nothing = %d, %v; want 0", v, err)
		}
		if err := b.Put(ctx, "a", nil, []byte("1")); err != nil {
			t.Fatal(err)
		}
		if err := b.Put(ctx, "a", nil, []byte("2")); !errors.Is(err, ErrExists) {
			t.Fatalf("a second create: %v, want ErrExists", err)
		}
		if err := b.Put(ctx, "a", []byte("0"), []byte("2")); !errors.Is(err, ErrChanged) {
			t.Fatalf("an update from a stale record: %v, want ErrChanged", err)
		}
		if err := b.Put(ctx, "b", []byte("0"), []byte("2")); !errors.Is(err, ErrChanged) {
			t.Fatalf("an update of nothing: %v, want ErrChanged", err)
		}
		v1, _ := b.Version(ctx)
		if err := b.Put(ctx, "a", []byte("1"), []byte("2")); err != nil {
			t.Fatal(err)
		}
		all, v2, err := b.All(ctx)
		if err != nil || v2 <= v1 || len(all) != 1 || string(all["a"]) != "2" {
			t.Fatalf("All() = %q, %d (before %d), %v", all, v2, v1, err)
		}
		if err := b.Put(ctx, "a", []byte("2"), nil); err != nil {
			t.Fatal(err)
		}
		all, v3, err := b.All(ctx)
		if err != nil || v3 <= v2 || len(all) != 0 {
			t.Fatalf("after the delete, All() = %q, %d, %v", all, v3, err)
		}
		// A second handle on the same store sees the same.
		if v, err := newBackend().Version(ctx); err != nil || v != v3 {
			t.Fatalf("another handle's Version() = %d, %v; want %d", v, err, v3)
		}
	})
}

// applied records what the registry applied.
type applied struct {
	mu    sync.Mutex
	dests []sender.Destination
	n     int
}

func (a *applied) apply(d []sender.Destination) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dests, a.n = d, a.n+1
	return nil
}

func (a *applied) names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, d := range a.dests {
		out = append(out, d.Name)
	}
	return out
}

func (a *applied) get(name string) (sender.Destination, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range a.dests {
		if d.Name == name {
			return d, true
		}
	}
	return sender.Destination{}, false
}

var key = bytes.Repeat([]byte{7}, KeyLen)

func newRegistry(t *testing.T, b Backend, a *applied, opts Options) *Registry {
	t.Helper()
	opts.Apply = a.apply
	r, err := New(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLifecycle: create, update, rotate and delete, each applied at once
// on the instance that made it and, on a second registry over the same
// store, at its next sync; the secret and header values are sealed at
// rest.
func TestLifecycle(t *testing.T) {
	backends(t, func(t *testing.T, newBackend func() Backend) {
		ctx := t.Context()
		static := sender.Destination{Name: "billing", URL: "http://billing.internal/hooks"}
		var a1, a2 applied
		r1 := newRegistry(t, newBackend(), &a1, Options{Key: key, Static: []sender.Destination{static}})
		r2 := newRegistry(t, newBackend(), &a2, Options{Key: key, Static: []sender.Destination{static}})

		v, err := r1.Create(ctx, Spec{Name: "acme", URL: "https://acme.example/hooks", Events: []string{"seat.*"},
			Headers: map[string]string{"X-Tenant": "acme", "Authorization": "Bearer tok_abc"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v.Secret, "whsec_") || v.Headers["Authorization"] != sender.Redacted || v.Headers["X-Tenant"] != "acme" {
			t.Fatalf("Create answered %+v", v)
		}
		secret := v.Secret
		if got := a1.names(); strings.Join(got, ",") != "billing,acme" {
			t.Fatalf("applied on the instance that made it: %v", got)
		}
		all, _, _ := newBackend().All(ctx)
		if raw := string(all["acme"]); strings.Contains(raw, strings.TrimPrefix(secret, "whsec_")) || strings.Contains(raw, "tok_abc") {
			t.Fatalf("a secret is stored in the clear: %s", raw)
		}
		if err := r2.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		d, ok := a2.get("acme")
		if !ok || !d.Guard || d.Header.Get("Authorization") != "Bearer tok_abc" {
			t.Fatalf("the other instance applied %+v, %v", d, ok)
		}
		// It signs with the secret answered.
		h, err := d.Signer.SignRequest(verify.Request{Body: []byte("{}")}, "msg_1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		check, _ := verify.New("standard", []string{secret}, verify.Options{})
		if _, err := check.Verify(verify.Request{Header: h, Body: []byte("{}")}, time.Now()); err != nil {
			t.Fatalf("the applied signer does not sign with the answered secret: %v", err)
		}
		if got, ok, err := r2.Get(ctx, "acme"); err != nil || !ok || got.Secret != "" {
			t.Fatalf("Get() answers %+v, %v: never the secret", got, ok)
		}

		url := "https://acme.example/v2"
		before, _ := a1.get("acme")
		if _, err := r2.Update(ctx, "acme", Patch{URL: &url}); err != nil {
			t.Fatal(err)
		}
		if err := r1.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if d, _ := a1.get("acme"); d.URL != url || d.Rev == before.Rev || d.Rev == "" {
			t.Fatalf("after the update on the other instance, applied %s version %q (before %q)", d.URL, d.Rev, before.Rev)
		}

		rv, err := r1.Rotate(ctx, "acme", "", time.Hour)
		if err != nil || rv.Secret == secret || !strings.HasPrefix(rv.Secret, "whsec_") || rv.PreviousExpiresAt == nil {
			t.Fatalf("Rotate() = %+v, %v", rv, err)
		}
		if d, _ := a1.get("acme"); d.Previous == nil || d.PreviousUntil.Before(time.Now().Add(59*time.Minute)) {
			t.Fatalf("after the rotation, applied previous %v until %v", d.Previous, d.PreviousUntil)
		}

		if _, err := r1.Create(ctx, Spec{Name: "acme", URL: "https://x.example/"}); !errors.Is(err, ErrExists) {
			t.Fatalf("a second create of acme: %v, want ErrExists", err)
		}
		if _, err := r1.Create(ctx, Spec{Name: "billing", URL: "https://x.example/"}); !errors.Is(err, ErrExists) {
			t.Fatalf("a create of the static name: %v, want ErrExists", err)
		}
		if _, err := r1.Update(ctx, "billing", Patch{URL: &url}); !errors.Is(err, ErrStatic) {
			t.Fatalf("an update of a static destination: %v, want ErrStatic", err)
		}
		if err := r1.Delete(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a delete of nothing: %v, want ErrNotFound", err)
		}
		if err := r2.Delete(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if err := r1.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := a1.names(); strings.Join(got, ",") != "billing" {
			t.Fatalf("after the delete, applied %v", got)
		}
	})
}

// TestRefused: what the API refuses, and why, with nothing stored.
func TestRefused(t *testing.T) {
	var a applied
	b := NewBolt(bolttest.Open(t, nil))
	guard := func(_ context.Context, u string) error {
		if strings.Contains(u, "169.254") {
			return errors.New("169.254.169.254 is a cloud metadata address")
		}
		return nil
	}
	r := newRegistry(t, b, &a, Options{Check: guard})
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"bad name", Spec{Name: "a/b", URL: "https://x.example/"}, "name"},
		{"no url", Spec{Name: "a"}, "url"},
		{"ftp", Spec{Name: "a", URL: "ftp://x.example/"}, "url"},
		{"scheme", Spec{Name: "a", URL: "https://x.example/", Scheme: "nope"}, "scheme"},
		{"bad glob", Spec{Name: "a", URL: "https://x.example/", Events: []string{"["}}, "glob"},
		{"hop-by-hop header", Spec{Name: "a", URL: "https://x.example/", Headers: map[string]string{"Connection": "close"}}, "Connection"},
		{"signature header", Spec{Name: "a", URL: "https://x.example/", Headers: map[string]string{"Webhook-Signature": "x"}}, "Webhook-Signature"},
		{"metadata address", Spec{Name: "a", URL: "http://169.254.169.254/latest"}, "metadata"},
		{"a hidden value sent back", Spec{Name: "a", URL: "https://x.example/", Headers: map[string]string{"Authorization": sender.Redacted}}, "send the value itself"},
		{"credentials in the URL", Spec{Name: "a", URL: "https://user:pw@x.example/"}, "no user or password"},
		{"rate", Spec{Name: "a", URL: "https://x.example/", Rate: 1e19}, "rate: at most"},
		{"short secret", Spec{Name: "a", URL: "https://x.example/", Secret: "whsec_c2hvcnQ="}, "at least 16 bytes"},
		{"bad tenant", Spec{Tenant: "-x", Name: "a", URL: "https://x.example/"}, "tenant"},
		{"tenant with a slash", Spec{Tenant: "a/b", Name: "c", URL: "https://x.example/"}, "tenant"},
	} {
		_, err := r.Create(t.Context(), tc.spec)
		var inv InvalidError
		var na NotAllowedError
		if err == nil || (!errors.As(err, &inv) && !errors.As(err, &na)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Create() = %v, want an InvalidError or NotAllowedError naming %q", tc.name, err, tc.want)
		}
		if tc.name == "metadata address" && !errors.As(err, &na) {
			t.Errorf("the guard's refusal is %T, want NotAllowedError", err)
		}
	}
	if v, _ := b.Version(t.Context()); v != 0 {
		t.Fatalf("refused creates wrote: version %d", v)
	}
}

// TestKeys: a record sealed under one key does not apply under another
// or none (left out, the rest applied); one kept plain, before a key was
// set, opens under the key and is sealed at its next change.
func TestKeys(t *testing.T) {
	db := bolttest.Open(t, nil)
	b := NewBolt(db)
	var a applied
	plain := newRegistry(t, b, &a, Options{})
	if _, err := plain.Create(t.Context(), Spec{Name: "old", URL: "https://old.example/", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}); err != nil {
		t.Fatal(err)
	}
	sealed := newRegistry(t, b, &a, Options{Key: key})
	if _, err := sealed.Create(t.Context(), Spec{Name: "new", URL: "https://new.example/"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.names(), ","); got != "old,new" {
		t.Fatalf("under the key, applied %q, want old,new", got)
	}
	desc := "now sealed"
	if _, err := sealed.Update(t.Context(), "old", Patch{Description: &desc}); err != nil {
		t.Fatal(err)
	}
	all, _, _ := b.All(t.Context())
	if strings.Contains(string(all["old"]), "MfKQ9r8") {
		t.Fatalf("the plain secret is still plain after a change under the key: %s", all["old"])
	}
	other := bytes.Repeat([]byte{8}, KeyLen)
	for _, opts := range []Options{{Key: other}, {}} {
		var b2 applied
		r := newRegistry(t, b, &b2, opts)
		if got := strings.Join(b2.names(), ","); got != "" {
			t.Fatalf("under another key (%v), applied %q: want none", opts.Key != nil, got)
		}
		if _, ok, _ := r.Get(t.Context(), "new"); ok {
			t.Fatal("a record that does not open is listed")
		}
	}
	if _, err := New(b, Options{Key: []byte("short")}); err == nil {
		t.Fatal("New took a 5-byte key")
	}
}

// TestIdleWritesNothing: a registry polling an unchanged Redis only
// reads its version: no write command reaches Redis, and the records
// are not read again.
func TestIdleWritesNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var a applied
	r := newRegistry(t, NewRedis(rdb, "idle"), &a, Options{Poll: 10 * time.Millisecond})
	if _, err := r.Create(t.Context(), Spec{Name: "acme", URL: "https://acme.example/"}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	applies := a.n
	a.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	for {
		info, err := rdb.Info(t.Context(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "cmdstat_get:calls=20") {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	info, _ := rdb.Info(t.Context(), "commandstats").Result()
	for _, line := range strings.Split(info, "\n") {
		cmd, _, _ := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		switch {
		case !strings.HasPrefix(line, "cmdstat_"):
		case cmd == "get", cmd == "info", cmd == "config|resetstat", cmd == "hello", strings.HasPrefix(cmd, "client|"):
			// reads, and a new connection's handshake
		default:
			t.Errorf("an idle registry ran %s", strings.TrimSpace(line))
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n != applies {
		t.Fatalf("an idle registry applied %d times", a.n-applies)
	}
}

// TestCreateWaitsForReplicas: under min_replicas 1 on a master with no
// replica, a create is refused (its outcome unknown: the master holds
// it, and says so), and counted; with a replica, it is answered.
func TestCreateWaitsForReplicas(t *testing.T) {
	master, replica := redistest.StartReplicated(t)
	redistest.WaitReplicas(t, master, 1)
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	w := replicas.New(rdb, 1, time.Second, slog.New(slog.DiscardHandler)) // the longest: a loaded machine's replica acknowledges in time
	var a applied
	r := newRegistry(t, NewRedis(rdb, "repl").WaitForReplicas(w), &a, Options{})
	if _, err := r.Create(t.Context(), Spec{Name: "acked", URL: "https://acked.example/"}); err != nil {
		t.Fatalf("with a replica: %v", err)
	}
	replica.Stop()
	_, err := r.Create(t.Context(), Spec{Name: "unacked", URL: "https://unacked.example/"})
	var short *replicas.Shortfall
	if !errors.As(err, &short) || !strings.Contains(err.Error(), `"unacked" may have been created`) {
		t.Fatalf("without a replica: %v; want a shortfall that says the outcome is unknown", err)
	}
	if got := w.Counts()["destination"]; got != 1 {
		t.Fatalf("shortfalls counted: %d, want 1", got)
	}
}

// TestTenantsShareNames: two tenants each create "orders", distinct
// destinations named <tenant>/orders; a third "orders" of no tenant is
// distinct too; the same name again within a tenant is ErrExists.
func TestTenantsShareNames(t *testing.T) {
	var a applied
	r := newRegistry(t, NewBolt(bolttest.Open(t, nil)), &a, Options{})
	for _, tenant := range []string{"acme", "globex", ""} {
		v, err := r.Create(t.Context(), Spec{Tenant: tenant, Name: "orders", URL: "https://" + cmp.Or(tenant, "none") + ".example/"})
		if err != nil {
			t.Fatal(err)
		}
		if want := sender.Qualify(tenant, "orders"); v.Name != want || v.Tenant != tenant {
			t.Errorf("created %q %q, want %q", v.Name, v.Tenant, want)
		}
	}
	if _, err := r.Create(t.Context(), Spec{Tenant: "acme", Name: "orders", URL: "https://x.example/"}); !errors.Is(err, ErrExists) {
		t.Errorf("acme/orders again: %v, want ErrExists", err)
	}
	if got := a.names(); !slices.Equal(got, []string{"acme/orders", "globex/orders", "orders"}) {
		t.Errorf("applied %v", got)
	}
	d, _ := a.get("globex/orders")
	if d.URL != "https://globex.example/" {
		t.Errorf("globex/orders goes to %s", d.URL)
	}
}

// TestNamesHoldNoSlash: a name with a slash is refused unless the
// tenant makes it: a Caddyfile's "partner/orders" would otherwise become
// tenant partner's without anyone saying so.
func TestNamesHoldNoSlash(t *testing.T) {
	if _, err := (Config{Name: "partner/orders", URL: "https://x.example/", Secret: "whsec_MDEyMzQ1Njc4OWFiY2RlZg=="}).Build(); err == nil || !strings.Contains(err.Error(), "tenant") {
		t.Errorf("a name with a slash: %v", err)
	}
	d, err := (Config{Tenant: "partner", Name: "orders", URL: "https://x.example/", Secret: "whsec_MDEyMzQ1Njc4OWFiY2RlZg=="}).Build()
	if err != nil || d.Name != "partner/orders" {
		t.Errorf("a tenant's: %q %v", d.Name, err)
	}
	if err := sender.CheckOperational("partner/orders", []sender.Destination{d}); err == nil {
		t.Error("a tenant's destination taken as the operational one")
	}
}
