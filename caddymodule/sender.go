package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/internal/store"
	"github.com/hookgate/hookgate/internal/zaplog"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/destinations"
	"github.com/hookgate/hookgate/verify"
)

// SenderConfig tunes the sender's workers; every field has a default.
type SenderConfig struct {
	// Workers caps the deliveries in flight over all destinations.
	// Default 20.
	Workers int `json:"workers,omitempty"`
	// Attempts is the total deliveries of an event, the first included.
	// Default 8.
	Attempts int `json:"attempts,omitempty"`
	// Backoff and BackoffCap shape the retries: capped exponential backoff
	// with full jitter. Default 2s and 15m.
	Backoff    caddy.Duration `json:"backoff,omitempty"`
	BackoffCap caddy.Duration `json:"backoff_cap,omitempty"`
	// Timeout bounds one attempt. Default 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Lease is how long a worker holds an envelope before it is presumed
	// dead and the envelope delivered again. Default 30s.
	Lease caddy.Duration `json:"lease,omitempty"`
	// Retention is how long dead letters are kept, and the history unless
	// History says. Default 168h.
	Retention caddy.Duration `json:"retention,omitempty"`
	// MaxRedrive is the most dead letters one redrive may move (a larger
	// limit is refused with 400 bad_limit). Default 10000.
	MaxRedrive int `json:"max_redrive,omitempty"`
	// History is how long delivered and dead envelopes stay searchable
	// (and delivered IDs idempotent). Default: the retention.
	History caddy.Duration `json:"history,omitempty"`
	// HistoryPayload is how long a delivered envelope keeps its payload, at
	// most History; 0 keeps none. Default 24h (at most History).
	HistoryPayload *caddy.Duration `json:"history_payload,omitempty"`
	// Breaker opens a destination's circuit.
	Breaker *BreakerConfig `json:"breaker,omitempty"`
	// DisableAfter and FailingAfter: a destination whose attempts have all
	// failed that long is disabled, or told failing (-1: never). Default
	// 120h and 1h. Operational names the destination told (docs/tenants.md).
	DisableAfter caddy.Duration `json:"disable_after,omitempty"`
	FailingAfter caddy.Duration `json:"failing_after,omitempty"`
	Operational  string         `json:"operational,omitempty"`
}

// BreakerConfig tunes each destination's circuit breaker.
type BreakerConfig struct {
	// Failures is how many consecutive transient failures open it.
	// Default 5.
	Failures int `json:"failures,omitempty"`
	// Open is how long it stays open before a trial. Default 30s.
	Open caddy.Duration `json:"open,omitempty"`
	// HalfOpen is how many trial deliveries go while half-open. Default 1.
	HalfOpen int `json:"half_open,omitempty"`
}

// DestinationConfig is one destination of the sender.
type DestinationConfig struct {
	// Name names the destination in webhook_enqueue, metrics and the
	// admin API.
	Name string `json:"name"`
	// Tenant owns it: it is then named <tenant>/<name> everywhere, and
	// only the tenant's events fan out to it.
	Tenant string `json:"tenant,omitempty"`
	// URL receives the deliveries (POST).
	URL string `json:"url"`
	// Scheme signs them: one of webhook_verify's schemes. Default standard.
	Scheme string `json:"scheme,omitempty"`
	// Secret is the signing secret; {env.*} and {file.*} are read when the
	// config loads. Required.
	Secret string `json:"secret,omitempty"`
	// KeyID names the secret in the signature: required by scheme
	// rfc9421, whose receivers select their key by it; refused by the
	// others.
	KeyID string `json:"key_id,omitempty"`
	// Workers caps this destination's deliveries in flight. Default: half
	// the sender's workers, at least 1.
	Workers int `json:"workers,omitempty"`
	// Rate limits this destination's attempts per second; 0: no limit.
	Rate float64 `json:"rate,omitempty"`
	// Events are the event types it subscribes to, globs (reservation.*,
	// seat.released): webhook_enqueue without a destination, and POST
	// /hookgate/events, deliver an event to every destination with a glob
	// that matches its type. Default none: only enqueues that name it.
	Events []string `json:"events,omitempty"`
	// Ordering is none (default) or entity: an entity's envelopes are
	// delivered one at a time, in enqueue order (docs/sending.md).
	Ordering string `json:"ordering,omitempty"`
	// OnDead is what an ordered entity does when its head dies: skip
	// (default) lets the next go, hold keeps it waiting until the dead
	// head is redriven, resent, purged or trimmed.
	OnDead string `json:"on_dead,omitempty"`
	// Headers are sent with every request, as given; {env.*} and
	// {file.*} values are read at load. Refused: hop-by-hop and framing
	// headers, Host, and those the scheme signs with.
	Headers http.Header `json:"headers,omitempty"`
	// PreviousSecret signs too until PreviousUntil (RFC 3339): a
	// rotation's old secret, beside the new one in the schemes that
	// carry several signatures (standard, stripe, ...); the others send
	// the new one only.
	PreviousSecret string `json:"previous_secret,omitempty"`
	PreviousUntil  string `json:"previous_until,omitempty"`
	// Guard is on to send through the SSRF guard: the URL may reach only
	// public addresses, or allow_networks. Default off: a static
	// destination is the operator's own.
	Guard string `json:"guard,omitempty"`
}

// provisionSender builds the sender's destinations. The sender itself
// starts with the app, on the store.
//
// The sender runs when a destination or the sender block is configured:
// `sender` alone runs it for the destinations made through the API.
func (a *App) provisionSender() error {
	if len(a.Destinations) == 0 && a.Sender == nil {
		if a.SecretsKey != "" {
			return errors.New("secrets_key seals the secrets of destinations made through the API: configure the sender block (sender) to run the sender")
		}
		return nil
	}
	if a.Sender == nil {
		a.Sender = new(SenderConfig)
	}
	repl := caddy.NewReplacer()
	if a.SecretsKey != "" {
		raw, err := resolveSecret(repl, "secrets_key", a.SecretsKey)
		if err == nil {
			a.secretsKey, err = destinations.ParseKey(raw)
		}
		if err != nil {
			return err
		}
	}
	if err := a.makeGuard(); err != nil {
		return err
	}
	for _, dc := range a.Destinations {
		d, err := a.staticDestination(repl, dc)
		if err != nil {
			return err
		}
		a.destinations = append(a.destinations, d)
	}
	if err := sender.CheckOperational(a.Sender.Operational, a.destinations); err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	a.storeUsed = true
	if _, err := a.history(); err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	return a.senderConfig().Validate()
}

// staticDestination is the sender's destination of dc, its placeholders
// read, built as the API's are (destinations.Config).
func (a *App) staticDestination(repl *caddy.Replacer, dc *DestinationConfig) (sender.Destination, error) {
	c := destinations.Config{Tenant: dc.Tenant, Name: dc.Name, URL: dc.URL, Scheme: dc.Scheme, KeyID: dc.KeyID, Events: dc.Events,
		Workers: dc.Workers, Rate: dc.Rate, Header: make(http.Header, len(dc.Headers))}
	var err error
	if c.Ordering, err = sender.ParseOrdering(dc.Ordering, dc.OnDead); err != nil {
		return sender.Destination{}, fmt.Errorf("destination %q: %w", dc.Name, err)
	}
	if c.Guard, err = a.guarded(dc); err != nil {
		return sender.Destination{}, err
	}
	if c.Secret, err = resolveSecret(repl, fmt.Sprintf("destination %q: secret", dc.Name), dc.Secret); err != nil {
		return sender.Destination{}, err
	}
	if dc.PreviousSecret != "" {
		if c.PreviousUntil, err = time.Parse(time.RFC3339, dc.PreviousUntil); err != nil {
			return sender.Destination{}, fmt.Errorf("destination %q: previous_secret: want its expiry, RFC 3339 (2026-12-10T00:00:00Z)", dc.Name)
		}
		if c.Previous, err = resolveSecret(repl, fmt.Sprintf("destination %q: previous_secret", dc.Name), dc.PreviousSecret); err != nil {
			return sender.Destination{}, err
		}
	}
	for name, vals := range dc.Headers {
		for _, raw := range vals {
			val, err := resolveSecret(repl, fmt.Sprintf("destination %q: header %s", dc.Name, name), raw)
			if err != nil {
				return sender.Destination{}, err
			}
			c.Header.Add(name, val)
		}
	}
	d, err := c.Build()
	if err == nil {
		err = sender.CheckDestinations(append(slices.Clone(a.destinations), d))
	}
	if err != nil {
		return d, err
	}
	if c.Previous != "" && !d.Signer.(*verify.Verifier).CarriesSeveral() {
		a.logger.Warn("destination's scheme carries one signature: it signs with the new secret only, previous_secret is not sent",
			zap.String("destination", dc.Name), zap.String("scheme", dc.Scheme))
	}
	if c.Secret == DevSecret {
		a.logger.Warn("destination signs with the public development secret: set HOOKGATE_SECRET to a secret of your own", zap.String("destination", dc.Name))
	}
	return d, nil
}

// history is what the queue keeps of what settled.
func (a *App) history() (sender.History, error) {
	sc := a.Sender
	var payload *time.Duration
	if sc.HistoryPayload != nil {
		payload = (*time.Duration)(sc.HistoryPayload)
	}
	return sender.NewHistory(a.retention(), time.Duration(sc.History), payload)
}

// senderConfig is the domain config of a.Sender.
func (a *App) senderConfig() sender.Config {
	sc := a.Sender
	cfg := sender.Config{
		Workers: sc.Workers, Attempts: sc.Attempts,
		Backoff: sender.Backoff{Base: time.Duration(sc.Backoff), Cap: time.Duration(sc.BackoffCap)},
		Timeout: time.Duration(sc.Timeout), Lease: time.Duration(sc.Lease),
		DisableAfter: time.Duration(sc.DisableAfter), FailingAfter: time.Duration(sc.FailingAfter),
	}
	if b := sc.Breaker; b != nil {
		cfg.Breaker = sender.BreakerConfig{Failures: b.Failures, Open: time.Duration(b.Open), HalfOpen: b.HalfOpen}
	}
	return cfg
}

func (a *App) retention() time.Duration {
	if a.Sender != nil && a.Sender.Retention > 0 {
		return time.Duration(a.Sender.Retention)
	}
	return sender.DefaultRetention
}

// startSender opens the queue on the store and runs the workers until
// Stop.
func (a *App) startSender() error {
	if a.Sender == nil {
		return nil
	}
	conn, err := a.store.Conn()
	if err != nil {
		return err
	}
	h, _ := a.history() // checked at provision
	q, err := conn.Queue(a.KeyPrefix, a.retention(), h)
	if err != nil {
		return fmt.Errorf("sender queue: %w", err)
	}
	// Readiness judges the store by its latest write: the queue's count.
	q = store.ObserveWrites(q, a.store.WriteDone)
	s, err := sender.New(q, a.senderConfig(), a.destinations, sender.Options{
		Logger:   zaplog.Slog(a.logger.Named("sender")),
		Observer: a.metrics.SenderObserver(),
		Breakers: conn.Breakers(a.KeyPrefix),
		Guard:    a.guard, Operational: a.Sender.Operational,
	})
	if err != nil {
		return err
	}
	var static []string
	for _, d := range a.destinations {
		static = append(static, d.Name)
	}
	if err := a.metrics.ObserveQueues(s, static); err != nil {
		return fmt.Errorf("sender metrics: %w", err)
	}
	a.metrics.ZeroDestinations(s.Destinations())
	ctx, cancel := context.WithCancel(context.Background())
	a.sender, a.stopSender, a.senderDone = s, cancel, new(sync.WaitGroup)
	maxRedrive := 0
	if a.Sender != nil {
		maxRedrive = a.Sender.MaxRedrive
	}
	a.settled = sender.NewSettled(q, s.Destinations, maxRedrive, nil)
	if err := a.startRegistry(ctx, conn); err != nil {
		cancel()
		return err
	}
	a.senderDone.Go(func() { s.Run(ctx) })
	a.logger.Info("sender started", zap.Strings("destinations", s.Destinations()))
	s.WarnOrphans(ctx)
	return nil
}

// startRegistry reads the destinations made through the API and applies
// them beside the Caddyfile's, then follows their changes until ctx ends.
// A store that does not answer yet is read again at each poll.
func (a *App) startRegistry(ctx context.Context, conn *store.Conn) error {
	reg, err := destinations.New(conn.Destinations(a.KeyPrefix), destinations.Options{
		Key:    a.secretsKey,
		Static: a.destinations,
		Apply:  a.sender.Apply, // an API destination's counters start at its first send; it has no gauges
		Check:  a.guard.CheckURL,
		Logger: zaplog.Slog(a.logger.Named("destinations")),
	})
	if err != nil {
		return fmt.Errorf("destinations: %w", err)
	}
	if err := reg.Sync(ctx); err != nil { // a store down at start: the poll reads them once it answers
		a.logger.Error("reading the destinations made through the API failed", zap.Error(err))
	}
	a.registry = reg
	a.senderDone.Go(func() { reg.Run(ctx) })
	return nil
}

// ops is the service over the sender's state that the admin API and the
// console use; nil until the sender runs. It holds nothing of its own, so
// a new one each time is the same service.
func (a *App) ops() *sender.Ops {
	if a.sender == nil {
		return nil
	}
	return sender.NewOps(a.sender, a.settled, sender.OpsOptions{
		Logger:   zaplog.Slog(a.logger),
		Redriven: a.metrics.Redriven,
	})
}

// stopSender stops the workers: in-flight deliveries finish and settle,
// leased envelopes not started are released.
func (a *App) stopSenderAndWait() {
	if a.stopSender != nil {
		a.stopSender()
		a.senderDone.Wait()
	}
}

// hasDestination reports whether name is a configured destination.
func (a *App) hasDestination(name string) bool {
	return slices.ContainsFunc(a.destinations, func(d sender.Destination) bool { return d.Name == name })
}
