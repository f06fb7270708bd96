// Package caddymodule holds hookgate's Caddy adapters: the webhook_* HTTP
// handlers, the hookgate app and its global option, metrics wiring and the
// CLI commands. The logic lives in the domain packages (verify, dedupe);
// this package parses, defaults, validates and maps results to HTTP.
package caddymodule

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/sender"
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

	// Reconcile declares reconcile jobs, run by `hookgate reconcile`, and
	// by the gateway for the jobs with `every`.
	Reconcile []*ReconcileJob `json:"reconcile,omitempty"`

	metrics       *metrics
	logger        *zap.Logger
	store         *lazyStore
	destinations  []sender.Destination
	sender        *sender.Sender
	dlq           *sender.DLQ
	dedupers      []*dedupe.Deduper // this config's, whose caches a forget clears
	stopSender    context.CancelFunc
	senderDone    *sync.WaitGroup
	stopSchedules func() // stops and waits for the scheduled reconcile runs
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
}

// lazyStore is the app's store. It opens on the app's Start, or on first
// use if a request comes first, never in Provision: `hookgate validate`
// must not take the bbolt file's lock from a running gateway. A config
// without dedupe never opens it.
type lazyStore struct {
	open    func() (opened, string, error)
	used    bool // a handler or the sender needs it: Start opens it
	once    sync.Once
	store   backend
	queue   func(retention time.Duration) (sender.AuditedQueue, error)
	shared  sender.Remote
	err     error
	poolKey string
}

// backend is what a store backend provides: dedupe and freshness state.
type backend interface {
	dedupe.Store
	dedupe.EntityStore
}

// get opens the store on first call.
func (l *lazyStore) get() (backend, error) {
	l.once.Do(func() {
		var o opened
		o, l.poolKey, l.err = l.open()
		l.store, l.queue, l.shared = o.backend, o.queue, o.breakers
	})
	return l.store, l.err
}

// The lazyStore is itself a dedupe.Store; each call opens it if needed.

func (l *lazyStore) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	s, err := l.get()
	if err != nil {
		return dedupe.ClaimResult{}, err
	}
	return s.Claim(ctx, key, c)
}

func (l *lazyStore) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	return s.Record(ctx, key, token, rec, retention, now)
}

func (l *lazyStore) Release(ctx context.Context, key, token string) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	return s.Release(ctx, key, token)
}

func (l *lazyStore) Get(ctx context.Context, key string, now time.Time) (dedupe.Entry, error) {
	s, err := l.get()
	if err != nil {
		return dedupe.Entry{}, err
	}
	return s.Get(ctx, key, now)
}

func (l *lazyStore) Forget(ctx context.Context, key string) (bool, error) {
	s, err := l.get()
	if err != nil {
		return false, err
	}
	return s.Forget(ctx, key)
}

func (l *lazyStore) GetEntity(ctx context.Context, entity string, now time.Time) (dedupe.EntityState, error) {
	s, err := l.get()
	if err != nil {
		return dedupe.EntityState{}, err
	}
	return s.GetEntity(ctx, entity, now)
}

func (l *lazyStore) AcquireEntity(ctx context.Context, entity string, a dedupe.Acquire) (dedupe.AcquireResult, error) {
	s, err := l.get()
	if err != nil {
		return dedupe.AcquireResult{}, err
	}
	return s.AcquireEntity(ctx, entity, a)
}

func (l *lazyStore) FinishEntity(ctx context.Context, entity, token string, f dedupe.Finish) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	return s.FinishEntity(ctx, entity, token, f)
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "hookgate",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets up the app.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
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
	m, err := newMetrics(ctx.GetMetricsRegistry())
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	a.metrics = m
	a.store = &lazyStore{open: func() (opened, string, error) {
		o, poolKey, err := a.openStore(a.logger)
		if err != nil {
			return opened{}, "", err
		}
		o.backend = newInstrumentedStore(o.backend, a.Store.Backend, a.metrics.storeOpDuration)
		return o, poolKey, nil
	}}
	for _, j := range a.Reconcile {
		if j.Every > 0 {
			a.store.used = true // the schedule's lock lives in the store
		}
	}
	return a.provisionSender()
}

// Validate checks the configuration.
func (a *App) Validate() error {
	switch a.Store.Backend {
	case "file":
		if len(a.Store.URLs) > 0 || a.Store.SentinelMaster != "" {
			return fmt.Errorf("store file takes a directory, not Redis URLs")
		}
	case "redis":
		if len(a.Store.URLs) == 0 {
			return fmt.Errorf("store redis needs at least one URL")
		}
		if _, err := redisOptions(a.Store); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown store backend %q (want file or redis)", a.Store.Backend)
	}
	names := map[string]bool{}
	for _, j := range a.Reconcile {
		if err := j.validate(); err != nil {
			return fmt.Errorf("reconcile %s: %w", j.Name, err)
		}
		if names[j.Name] {
			return fmt.Errorf("reconcile %s given twice", j.Name)
		}
		names[j.Name] = true
		if j.Every > 0 && j.Repair != nil && !a.hasDestination(j.Repair.Destination) {
			return fmt.Errorf("reconcile %s: repair destination %q is not configured", j.Name, j.Repair.Destination)
		}
	}
	return nil
}

// Start opens the store when a handler or the sender needs it, starts
// the sender's workers, and makes the app the one the admin API serves.
func (a *App) Start() error {
	if a.store.used {
		if _, err := a.store.get(); err != nil {
			return err
		}
	}
	if err := a.startSender(); err != nil {
		return err
	}
	a.startSchedules()
	setRunning(a)
	return nil
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
	if a.store != nil && a.store.poolKey != "" {
		if _, err := connections.Delete(a.store.poolKey); err != nil {
			a.logger.Error("closing store", zap.Error(err))
		}
	}
	if a.metrics != nil {
		return a.metrics.shutdown()
	}
	return nil
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
