// Package sender delivers outbound webhooks from a durable queue. An
// [Envelope] is one event on its way to one destination: enqueued once by
// delivery ID, leased by the [Sender]'s workers in batches, delivered
// signed, retried with capped exponential backoff and full jitter on
// transient failures, dead-lettered on permanent ones or when its attempts
// run out, and redriven by an operator. [Classify] names an attempt's
// failure class, and a circuit breaker per destination holds attempts to a
// destination that keeps failing. [Settled] serves the settled envelopes:
// the dead letters and the delivery history. [Ops] is the one service
// behind every door to the sender's state, the admin API (package
// httpapi, which the hookgate commands speak to) and the console: each
// state change goes through it. Events come in through package intake.
//
// The [Queue] interface is what it needs of a store; the redisqueue and
// boltqueue packages implement it and pass the one conformance suite in
// queuetest. It imports no Caddy.
package sender

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/internal/netguard"
	"github.com/hookgate/hookgate/verify"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"
)

// Defaults of Config.
const (
	DefaultWorkers   = 20
	DefaultAttempts  = 8
	DefaultBase      = 2 * time.Second
	DefaultCap       = 15 * time.Minute
	DefaultTimeout   = 10 * time.Second
	DefaultLease     = 30 * time.Second
	DefaultRetention = 168 * time.Hour
	DefaultBatch     = 64
)

// Config tunes a Sender.
type Config struct {
	// Workers caps the deliveries in flight over all destinations.
	Workers int
	// Attempts is the total deliveries of an envelope, the first included;
	// then it is dead-lettered.
	Attempts int
	// Backoff spaces the retries.
	Backoff Backoff
	// Timeout bounds one attempt.
	Timeout time.Duration
	// Lease bounds a worker's hold of an envelope: one not settled by then
	// (a crashed worker) is delivered again. An attempt starts only when
	// its timeout and a settle margin (a tenth of the lease, at least 1s,
	// at most a quarter of the lease) fit in what is left of its lease.
	Lease time.Duration
	// Breaker opens a destination's circuit after consecutive failures
	// that Classify counts (BreakerFailure).
	Breaker BreakerConfig
	// Batch is the most envelopes one lease takes.
	Batch int
	// Poll is the longest an idle destination waits before it looks for
	// due envelopes again (an Enqueue through this Sender wakes it at once).
	Poll time.Duration
	// DisableAfter disables a destination whose attempts have all failed
	// (as the breaker counts failures) for this long: paused, its
	// envelopes kept, until an operator enables it (operational.go).
	// Default DefaultDisableAfter; negative: never.
	DisableAfter time.Duration
	// FailingAfter tells destination.failing of a destination whose
	// attempts have all failed for this long. Default
	// DefaultFailingAfter; negative: never.
	FailingAfter time.Duration
}

// BreakerConfig tunes the per-destination circuit breaker.
type BreakerConfig struct {
	Failures int           // consecutive counted failures that open it; default 5
	Open     time.Duration // how long it stays open before a trial; default 30s
	HalfOpen int           // trial deliveries while half-open; default 1
}

// Destination is where envelopes go.
type Destination struct {
	Name string
	URL  string
	// Signer signs each request; nil sends it unsigned.
	Signer Signer
	// Previous signs each request too, until PreviousUntil: a rotation's
	// old secret, its signature beside the new one's in the scheme's
	// form for several (verify.Verifier.Cosign); a scheme that carries
	// one signature sends the new one only.
	Previous      Signer
	PreviousUntil time.Time
	// Workers caps this destination's deliveries in flight; default: half
	// the global cap, at least 1, so that no destination can take every
	// slot. It is at most the global cap.
	Workers int
	// Rate limits this destination's attempts per second; 0: no limit.
	Rate  rate.Limit
	Burst int
	// Header is added to every request.
	Header http.Header
	// Events are the event types it subscribes to, as path.Match globs
	// (reservation.*): Publish delivers an event to every destination
	// with a glob that matches its type. None: only explicit enqueues.
	Events []string
	// Ordering orders its envelopes per entity (Queue.Order); the zero
	// value does not.
	Ordering Ordering
	// Guard sends through the SSRF guard (Options.Guard): its URL may
	// reach only public addresses, or the ranges the guard allows.
	Guard bool
	// Rev tells versions of a destination apart: Apply keeps running a
	// destination whose name and Rev it has already, and restarts one
	// whose Rev changed. Static destinations leave it empty.
	Rev string
}

// CheckDestinations reports the first destination that has no name, a
// name given before, a URL that is not http:// or https://, or negative
// workers or rate. A URL is never quoted: it may hold secrets.
func CheckDestinations(dests []Destination) error {
	seen := map[string]bool{}
	for _, d := range dests {
		switch {
		case d.Name == "":
			return errors.New("destination: a name is required")
		case seen[d.Name]:
			return fmt.Errorf("destination %q is configured twice", d.Name)
		case d.Workers < 0 || d.Rate < 0:
			return fmt.Errorf("destination %q: workers and rate must not be negative", d.Name)
		case strings.Count(d.Name, "/") > 1 || strings.HasPrefix(d.Name, "/") || strings.HasSuffix(d.Name, "/"):
			return fmt.Errorf("destination %q: a name holds one slash at most, between its tenant and its own name (tenant/name)", d.Name)
		case strings.ContainsAny(d.Name, "{}"):
			return fmt.Errorf("destination %q: a name must not hold { or }: on Redis a destination's keys share the hash tag {<name>}, "+
				"and a brace in the name would split them over Redis Cluster slots", d.Name)
		}
		seen[d.Name] = true
		u, err := url.Parse(d.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("destination %q: url must be an http:// or https:// URL", d.Name)
		}
		for _, g := range d.Events {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				return fmt.Errorf("destination %q: events %q is not a glob (want e.g. reservation.* or seat.released)", d.Name, g)
			}
		}
	}
	return nil
}

// Signer signs an outbound request: the headers a receiver verifies.
// *verify.Verifier is one.
type Signer interface {
	SignRequest(r verify.Request, id string, ts time.Time) (http.Header, error)
}

// Observer is told what happens, for metrics. Labels are destination
// names from the configuration.
type Observer interface {
	// Attempt is one delivery attempt: result is 2xx, transient or
	// permanent.
	Attempt(dest, result string, latency time.Duration)
	// Delivered is an envelope delivered, age after its enqueue.
	Delivered(dest string, age time.Duration)
	// Dead is an envelope dead-lettered, quarantined after its first
	// failed attempt.
	Dead(dest string, quarantined time.Duration)
	// StoreError is a failed queue operation: op is lease, settle, pause
	// (writing a 410's pause), paused (reading the pause) or trim (the
	// history's, TrimHistory).
	StoreError(dest, op string)
	// Enqueued is an enqueue: result is queued, duplicate (found
	// enqueued already), or unrouted (an event no destination subscribes
	// to; dest is "").
	Enqueued(dest, result string)
	// Disabled is a destination disabled: reason is failing
	// (DisableAfter) or gone (a 410).
	Disabled(dest, reason string)
}

// Sender delivers the envelopes of its destinations. Create it with New,
// run it with Run; Enqueue is safe to call at any time.
type Sender struct {
	queue Queue
	cfg   Config
	// operational is the destination told of the others (operational.go).
	operational string
	// set is the destinations now, swapped whole by Apply (apply.go).
	set    atomic.Pointer[destSet]
	client *http.Client
	guard  func() *http.Client // client through the SSRF guard, made once when first needed
	now    func() time.Time
	logger *slog.Logger
	obs    Observer
	slots  *slots       // the global worker cap
	shared *sharedStore // the breakers' state
	// seen is set once the store has recorded when it first saw the
	// destinations (Queue.FirstSeen): by Run, or by the first Publish.
	seen atomic.Bool
	// trimWake wakes the history's trim (trimHistory) after a
	// settlement; trimStale names the destinations that settled.
	trimWake  chan struct{}
	trimMu    sync.Mutex
	trimStale map[string]bool
	// run is Run's state, for the destinations' loops to start under.
	run struct {
		sync.Mutex
		ctx     context.Context // nil before Run and after it stopped
		runners sync.WaitGroup
	}
	applyMu sync.Mutex // one Apply at a time
}

// destination is a destination's running state.
type destination struct {
	Destination
	origin string       // scheme://host[:port] of URL: what errors name
	client *http.Client // the sender's, or its guarded one (Guard)
	brk    *breakerCell // this instance's own breaker, made when first needed
	shared *sharedStore // the breaker's board, which breaker follows
	// request is the template of every request to URL: its method, parsed
	// URL and host, cloned (shallowly) for each attempt; made at the
	// first (template), so that an idle destination holds none.
	reqOnce sync.Once
	request *http.Request
	// base is what every request's header starts with: Header, the
	// User-Agent, and the content type when Header sets one (hasCT),
	// made once (baseOnce). Its values are shared by every request, so
	// they are never modified.
	baseOnce sync.Once
	base     http.Header
	hasCT    bool
	limiter  *rate.Limiter
	workers  int // its cap on deliveries in flight
	wake     chan struct{}
	pause    *pauseFlag // kept across an update, as breaker is
	told     *told      // the operational events told of it (operational.go), kept likewise
	loop     loop       // its delivery loop, while it has work (apply.go)
}

// Options are a Sender's dependencies; the zero value means the defaults.
type Options struct {
	Now      func() time.Time
	Logger   *slog.Logger
	Observer Observer
	// Transport sends the requests; default: a clone of
	// http.DefaultTransport whose response headers are bounded at 64 KiB
	// (MaxResponseHeaderBytes), so a hostile receiver's endless headers
	// cost little memory. A Transport given here is used as it is: bound
	// its response headers yourself.
	Transport http.RoundTripper
	// Breakers shares the breakers' state with other instances; nil
	// keeps it in this process.
	Breakers Remote
	// Operational names the destination that receives the operational
	// events (operational.go): one of the destinations New is given.
	// "": none are told.
	Operational string
	// Guard is the SSRF guard of the destinations with Guard set: their
	// requests go through a clone of Transport (an *http.Transport)
	// that dials through it, and never through a proxy (which would
	// reach what the guard refuses). Nil: a guard with no range allowed.
	Guard *netguard.Guard
}

// New returns a Sender over q for dests.
func New(q Queue, cfg Config, dests []Destination, opts Options) (*Sender, error) {
	cfg = withDefaults(cfg)
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Keep a connection per worker: the default of 2 idle connections
		// per host would open a new one for most deliveries.
		t.MaxIdleConnsPerHost = cfg.Workers
		t.MaxResponseHeaderBytes = maxResponseHeader
		opts.Transport = t
	}
	s := &Sender{
		queue: q, cfg: cfg, now: opts.Now, logger: opts.Logger, obs: opts.Observer,
		slots:    newSlots(cfg.Workers),
		trimWake: make(chan struct{}, 1), trimStale: map[string]bool{},
		shared: newSharedStore(opts.Breakers, cfg.Breaker.Open, breakerRefresh, opts.Now),
		client: &http.Client{
			Transport: opts.Transport,
			// Redirects are never followed: a 3xx is the receiver's answer.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	s.guard = sync.OnceValue(func() *http.Client { return s.guardedClient(opts) })
	if err := s.Apply(dests); err != nil {
		return nil, err
	}
	if err := CheckOperational(opts.Operational, dests); err != nil {
		return nil, err
	}
	s.operational = opts.Operational
	return s, nil
}

// guardedClient is s.client, dialling through opts.Guard, without a
// proxy.
func (s *Sender) guardedClient(opts Options) *http.Client {
	g := opts.Guard
	if g == nil {
		g = netguard.New(netguard.Options{})
	}
	t, ok := opts.Transport.(*http.Transport)
	if !ok {
		t = http.DefaultTransport.(*http.Transport)
	}
	t = t.Clone()
	t.Proxy = nil
	t.DialContext = g.DialContext
	t.DialTLSContext, t.DialTLS, t.Dial = nil, nil, nil //nolint:staticcheck // SA1019: the deprecated dialers would dial around the guard as well
	c := *s.client
	c.Transport = t
	return &c
}

func withDefaults(cfg Config) Config {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff.Base <= 0 {
		cfg.Backoff.Base = DefaultBase
	}
	if cfg.Backoff.Cap <= 0 {
		cfg.Backoff.Cap = DefaultCap
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Breaker.Failures <= 0 {
		cfg.Breaker.Failures = 5
	}
	if cfg.Breaker.Open <= 0 {
		cfg.Breaker.Open = 30 * time.Second
	}
	if cfg.Breaker.HalfOpen <= 0 {
		cfg.Breaker.HalfOpen = 1
	}
	if cfg.DisableAfter == 0 {
		cfg.DisableAfter = DefaultDisableAfter
	}
	if cfg.FailingAfter == 0 {
		cfg.FailingAfter = DefaultFailingAfter
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	return cfg
}

// Validate reports a config New would refuse, its defaults applied.
func (cfg Config) Validate() error { return withDefaults(cfg).check() }

// check reports a config whose lease could expire under a worker: an
// envelope may wait for one attempt in the prefetch buffer, then make its
// own, so the lease must outlast two timeouts. (With the settle margin on
// top, an envelope that waited a whole timeout may still not fit: it is
// released unattempted and leased again, never lost.)
func (cfg Config) check() error {
	if cfg.Lease < 2*cfg.Timeout {
		return fmt.Errorf("sender: lease %s must be at least twice the timeout %s", cfg.Lease, cfg.Timeout)
	}
	return nil
}

// Destinations lists the configured destination names, in order.
func (s *Sender) Destinations() []string { return slices.Clone(s.set.Load().order) }

// Queue is the sender's queue, for the dead-letter service.
func (s *Sender) Queue() Queue { return s.queue }

// breakerRefresh is how often an instance reads the shared breaker state:
// a breaker opened on one instance is open on all within about this long
// after it is merged.
const breakerRefresh = 100 * time.Millisecond

// pauseRefresh is how often a destination that holds leases reads its
// pause from the store: a pause made by another instance holds here within
// about this long.
const pauseRefresh = 100 * time.Millisecond

// maxResponseHeader bounds a response's header (the default transport's
// MaxResponseHeaderBytes). An answer whose header is larger fails as a
// network error: transient, counted by the breaker, as any receiver that
// does not answer properly.
const maxResponseHeader = 64 << 10

// settleMargin is the time an attempt leaves in its lease beyond its
// timeout, for its outcome to be settled before the lease ends: a tenth of
// the lease, at least a second, but no more than a quarter of the lease
// (the lease is at least twice the timeout, so an envelope may still wait
// a quarter of it for its attempt). An attempt starts only when its
// timeout plus this margin fits in what is left of its lease: 3s of the
// default 30s lease.
func settleMargin(lease time.Duration) time.Duration {
	return min(max(time.Second, lease/10), lease/4)
}

// BreakerState is a destination's breaker state (closed when it cannot
// be read).
func (s *Sender) BreakerState(dest string) (gobreaker.State, bool) {
	d, ok := s.dest(dest)
	if !ok {
		return 0, false
	}
	return d.state(), true
}

// state is d's breaker state, the shared state followed.
func (d *destination) state() gobreaker.State { return d.shared.state(d.Name) }

// ErrUnknownDestination means an envelope names no configured destination.
var ErrUnknownDestination = errors.New("unknown destination")

// Enqueue queues e for delivery: idempotent by e.ID within its
// destination. CreatedAt and NextAt default to now. An ID that is not 1
// to 1024 bytes of visible ASCII (CheckID) is refused with an error that
// wraps ErrBadID, and an entity over MaxEntityLen with ErrEntityTooLong;
// nothing is written then: every door relies on these checks. Another
// error leaves the outcome unknown (the store may have applied it). The
// Observer is told of each enqueue applied.
func (s *Sender) Enqueue(ctx context.Context, e *Envelope) (EnqueueResult, error) {
	if err := CheckID(e.ID); err != nil {
		return EnqueueResult{}, err
	}
	if err := CheckEntity(e.Entity); err != nil {
		return EnqueueResult{}, err
	}
	d, ok := s.dest(e.Destination)
	if !ok {
		return EnqueueResult{}, fmt.Errorf("%w %q", ErrUnknownDestination, e.Destination)
	}
	now := s.now()
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	if e.NextAt.IsZero() {
		e.NextAt = e.CreatedAt
	}
	res, err := s.queue.Enqueue(ctx, e)
	if err == nil {
		s.obs.Enqueued(e.Destination, enqueueResult(res.Duplicate))
	}
	if err == nil && !res.Duplicate && !d.pause.get() { // a paused one waits for its resume's wake-up
		s.wakeUp(d)
	}
	return res, err
}

// Run delivers until ctx ends, then stops leasing, lets the deliveries in
// flight finish (each bounded by the timeout), settles them, and releases
// what it leased but did not start. Nothing is dropped: an envelope whose
// settlement fails is delivered again when its lease expires.
func (s *Sender) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	bctx, stopBreakers := context.WithCancel(context.Background())
	defer stopBreakers() // after the workers: their last outcomes are reported
	wg.Go(func() { s.shared.run(bctx, 50*time.Millisecond) })
	wg.Go(func() { s.recordFirstSeen(ctx) })
	wg.Go(func() { s.trimHistory(ctx) })
	if s.operational != "" {
		wg.Go(func() { s.tellDeaths(ctx) })
	}
	s.run.Lock()
	s.run.ctx = ctx
	s.run.Unlock()
	wg.Go(func() { s.scan(ctx) })
	<-ctx.Done()
	s.run.Lock()
	s.run.ctx = nil // no loop starts from now on
	s.run.Unlock()
	s.run.runners.Wait()
}

// recordFirstSeen records when the store first saw each destination
// (Queue.FirstSeen), retrying until the store answers or ctx ends: a
// fan-out completes an event only for the destinations seen before it.
func (s *Sender) recordFirstSeen(ctx context.Context) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 30*time.Second) {
		if s.seen.Load() || ctx.Err() != nil {
			return
		}
		if _, err := s.queue.FirstSeen(ctx, s.Destinations(), s.now()); err == nil {
			s.seen.Store(true)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// enqueueResult is the Observer's result of an enqueue.
func enqueueResult(duplicate bool) string {
	if duplicate {
		return "duplicate"
	}
	return "queued"
}

type nopObserver struct{}

func (nopObserver) Attempt(string, string, time.Duration) {}
func (nopObserver) Delivered(string, time.Duration)       {}
func (nopObserver) Dead(string, time.Duration)            {}
func (nopObserver) StoreError(string, string)             {}
func (nopObserver) Enqueued(string, string)               {}
func (nopObserver) Disabled(string, string)               {}

// Wake makes dest look for due envelopes at once (after a resume or a
// redrive).
func (s *Sender) Wake(dest string) {
	if d, ok := s.dest(dest); ok {
		s.wakeUp(d)
	}
}
