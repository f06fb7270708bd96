// Package caddymodule holds hookgate's Caddy adapters: the webhook_* HTTP
// handlers (verify, dedupe, freshness, enqueue, health, console), the
// hookgate app (its store, sender, reconcile jobs and admin routes) and
// their Caddyfile. The logic lives in the domain packages; this package
// parses, defaults and maps results to HTTP. The CLI is its package cli.
package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/caddymodule/listen"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/netguard"
	"github.com/hookgate/hookgate/internal/portcheck"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/store"
	"github.com/hookgate/hookgate/internal/telemetry"
	"github.com/hookgate/hookgate/internal/zaplog"
	"github.com/hookgate/hookgate/portal"
	"github.com/hookgate/hookgate/reconcile"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/destinations"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the hookgate app: it holds what the webhook handlers share, the
// state store and the metrics instruments. Handlers find it with
// ctx.App("hookgate"); when no global option configures it, it runs with
// its defaults (the embedded store under Caddy's data directory).
type App struct {
	// Store says where hookgate keeps its state. Default: the embedded
	// store in caddy.AppDataDir()/hookgate.
	Store *StoreConfig `json:"store,omitempty"`

	// KeyPrefix starts every Redis key. Default: "hookgate".
	KeyPrefix string `json:"key_prefix,omitempty"`

	// Sender tunes the outbound delivery workers.
	Sender *SenderConfig `json:"sender,omitempty"`

	// Destinations are where the sender delivers.
	Destinations []*DestinationConfig `json:"destinations,omitempty"`

	// AllowNetworks are the ranges (CIDR) the SSRF guard lets through,
	// though a rule refuses them: an internal network whose receivers a
	// guarded destination may reach. Default none.
	AllowNetworks []string `json:"allow_networks,omitempty"`

	// SecretsKey seals the secrets of the destinations made through the
	// admin API, in the store (AES-256-GCM): the base64 of 32 random
	// bytes, best given as {env.*} or {file.*}. Default none: they are
	// kept plain, with a warning at start.
	SecretsKey string `json:"secrets_key,omitempty"`

	// PortalKey signs portal links (HMAC-SHA256): at least 32 bytes, best
	// {env.*} or {file.*}. PortalURL is where they point: the page that
	// webhook_console { portal } serves. Both, or neither.
	PortalKey string `json:"portal_key,omitempty"`
	PortalURL string `json:"portal_url,omitempty"`

	// Reconcile declares reconcile jobs, run by `hookgate reconcile`, and
	// by the gateway for the jobs with `every`.
	Reconcile []*ReconcileJob `json:"reconcile,omitempty"`

	ctx           caddy.Context
	metrics       *telemetry.Metrics
	logger        *zap.Logger
	store         *store.Lazy // opened on Start when storeUsed, or on first use
	storeUsed     bool        // a handler, the sender or a schedule needs the store
	poolKey       string      // the open store's key in connections
	destinations  []sender.Destination
	guard         *netguard.Guard // the SSRF guard, made when a destination turns it on
	loadGuard     *netguard.Guard // the same without the listeners, for the URLs at load
	sender        *sender.Sender
	settled       *sender.Settled
	registry      *destinations.Registry // the API's destinations, while the sender runs
	secretsKey    []byte                 // SecretsKey, read
	portal        *portal.Links          // nil without PortalKey
	dedupers      []*dedupe.Deduper      // this config's, whose caches a forget clears
	stopSender    context.CancelFunc
	senderDone    *sync.WaitGroup
	stopSchedules func()     // stops and waits for the scheduled reconcile runs
	admin         *route.Mux // the admin API's router, built at Start
}

// StoreConfig selects the state store.
type StoreConfig struct {
	// Backend is "file" (the embedded bbolt store, default) or "redis".
	Backend string `json:"backend,omitempty"`

	// Dir is the file backend's directory, created if missing; the bbolt
	// file state.db lives in it. Default: caddy.AppDataDir()/hookgate.
	Dir string `json:"dir,omitempty"`

	// URLs are the Redis addresses (redis:// or rediss://). One URL is a
	// single node; several are a Cluster's seed nodes, or Sentinels when
	// SentinelMaster is set.
	URLs []string `json:"urls,omitempty"`

	// SentinelMaster is the master name to ask the Sentinels for.
	SentinelMaster string `json:"sentinel_master,omitempty"`

	// MinReplicas is how many replicas each write that an answer depends
	// on waits for (Redis's WAIT), within ReplicaTimeout (default
	// 100ms). Default 0: none.
	MinReplicas    int            `json:"min_replicas,omitempty"`
	ReplicaTimeout caddy.Duration `json:"replica_timeout,omitempty"`
}

// connections holds the open stores, keyed by their config, so that a
// config reload (which provisions the new config before the old one is
// cleaned up) reuses them instead of opening them twice.
var connections = caddy.NewUsagePool()

// openStore opens the configured store, or reuses the one open already,
// and remembers its key in connections for Cleanup.
func (a *App) openStore() (*store.Conn, error) {
	cfg, err := a.storeConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Backend == "redis" {
		setRedisLogger.Do(func() {
			redis.SetLogger(zaplog.Redis{Logger: func() *zap.Logger { return caddy.Log().Named("redis") }})
		})
	}
	key, _ := json.Marshal(cfg)
	v, _, err := connections.LoadOrNew(string(key), func() (caddy.Destructor, error) {
		return store.Open(cfg, zaplog.Slog(a.logger))
	})
	if err != nil {
		return nil, err
	}
	a.poolKey = string(key)
	return v.(*store.Conn), nil
}

// storeConfig is a.Store, checked, with the {env.*} and {file.*}
// placeholders of its Redis URLs read now, so that a password never
// appears in the adapted config.
func (a *App) storeConfig() (store.Config, error) {
	cfg := store.Config{Backend: a.Store.Backend, Dir: a.Store.Dir, SentinelMaster: a.Store.SentinelMaster,
		MinReplicas: a.Store.MinReplicas, ReplicaTimeout: time.Duration(a.Store.ReplicaTimeout)}
	repl := caddy.NewReplacer()
	for i, tmpl := range a.Store.URLs {
		u, err := repl.ReplaceOrErr(tmpl, true, true)
		if err != nil {
			return cfg, fmt.Errorf("store redis: URL %d: %v", i+1, err)
		}
		cfg.URLs = append(cfg.URLs, u)
	}
	return cfg, cfg.Check()
}

// setRedisLogger sends go-redis's own log lines through Caddy's logger,
// once per process.
var setRedisLogger sync.Once

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "hookgate",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets up the app.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx, a.logger = ctx, ctx.Logger()
	if a.KeyPrefix == "" {
		a.KeyPrefix = "hookgate"
	}
	if a.Store == nil {
		a.Store = new(StoreConfig)
	}
	if a.Store.Backend == "" {
		a.Store.Backend = "file"
	}
	if a.Store.Backend == "file" && a.Store.Dir == "" {
		a.Store.Dir = filepath.Join(caddy.AppDataDir(), "hookgate")
	}
	m, err := telemetry.New(ctx.GetMetricsRegistry())
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	a.metrics = m
	// The store opens on Start, or on first use if a request comes
	// first, never here: `hookgate validate` must not take the bbolt
	// file's lock from a running gateway.
	a.store = store.NewLazy(a.openStore, a.KeyPrefix, a.Store.Backend, m.StoreOpDuration())
	if err := m.ObserveReplicationShortfalls(a.store.ReplicationShortfalls); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	for _, j := range a.Reconcile {
		if j.Every > 0 {
			a.storeUsed = true // the schedule's lock lives in the store
		}
	}
	if a.PortalKey != "" || a.PortalURL != "" {
		key, err := resolveSecret(caddy.NewReplacer(), "portal_key", a.PortalKey)
		if err == nil {
			a.portal, err = portal.New(key, a.PortalURL, a.useStore(), nil)
		}
		if err != nil {
			return err
		}
	}
	return a.provisionSender()
}

// Validate checks the configuration.
func (a *App) Validate() error {
	if _, err := a.storeConfig(); err != nil {
		return err
	}
	jobs := make([]*reconcile.JobSpec, len(a.Reconcile))
	for i, j := range a.Reconcile {
		jobs[i] = j.spec()
	}
	return reconcile.CheckJobs(jobs, a.hasDestination)
}

// Start refuses an address another process serves, opens the store when
// a handler or the sender needs it, starts the sender's workers, and makes
// the app the one the admin API serves.
func (a *App) Start() error {
	if err := a.refuseSharedAddress(); err != nil {
		return err
	}
	if a.storeUsed {
		if _, err := a.store.Conn(); err != nil {
			return err
		}
	}
	if err := a.startSender(); err != nil {
		return err
	}
	a.startSchedules()
	a.admin = a.adminRouter()
	setRunning(a)
	return nil
}

// refuseSharedAddress fails when another process listens on an address of
// the HTTP servers (TCP, and UDP where a server serves HTTP/3), or on one
// this process listens on already (the admin endpoint): Caddy listens
// with SO_REUSEPORT, and would share it. Caddy starts its apps in no set
// order: when the http app started first, the check sees its listeners as
// ours, and a failure here stops it. When the check cannot run (no /proc)
// it warns, and the gateway starts.
func (a *App) refuseSharedAddress() error {
	var targets []portcheck.Target
	if v, err := a.ctx.AppIfConfigured("http"); err == nil {
		targets = listen.Targets(v.(*caddyhttp.App))
	}
	err := portcheck.Check(a.ctx, targets)
	if errors.Is(err, portcheck.ErrUnchecked) {
		a.logger.Warn("not checking for another process on the gateway's addresses; starting anyway", zap.Error(err))
		return nil
	}
	return err
}

// Stop stops the sender's workers: deliveries in flight finish and are
// settled, leased envelopes not started are released. On a reload the new
// config's workers have already started; the queue's leases keep the two
// from delivering one envelope twice.
func (a *App) Stop() error {
	unsetRunning(a)
	if a.stopSchedules != nil {
		a.stopSchedules()
	}
	a.stopSenderAndWait()
	return nil
}

// Cleanup releases what Provision acquired.
func (a *App) Cleanup() error {
	if a.poolKey != "" {
		if _, err := connections.Delete(a.poolKey); err != nil {
			a.logger.Error("closing store", zap.Error(err))
		}
	}
	if a.metrics != nil {
		return a.metrics.Shutdown()
	}
	return nil
}

// useStore returns the app's shared store, opened when the app starts,
// for a handler that keeps its state in it.
func (a *App) useStore() *store.Lazy {
	a.storeUsed = true
	return a.store
}

// appFrom returns the hookgate app of ctx's config, provisioning it with
// defaults when no global option configured it.
func appFrom(ctx caddy.Context) (*App, error) {
	v, err := ctx.App("hookgate")
	if err != nil {
		return nil, fmt.Errorf("loading hookgate app: %w", err)
	}
	return v.(*App), nil
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
