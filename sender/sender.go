// Package sender delivers outbound webhooks from a durable queue. An
// [Envelope] is one event on its way to one destination: enqueued once by
// delivery ID, leased by the [Sender]'s workers in batches, delivered
// signed, retried with capped exponential backoff and full jitter on
// transient failures, dead-lettered on permanent ones or when its attempts
// run out, and redriven by an operator. [Classify] names an attempt's
// failure class, and a circuit breaker per destination holds attempts to a
// destination that keeps failing. [DLQ] is the dead-letter service: list,
// group, inspect, redrive and purge. [Ops] is the one service behind every
// door to the sender's state, the admin API (package httpapi, which the
// hookgate commands speak to) and the console: each state change goes
// through it.
//
// The [Queue] interface is what it needs of a store; the redisqueue and
// boltqueue packages implement it and pass the one conformance suite in
// queuetest. It imports no Caddy.
package sender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

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
	// BreakerState is a destination's breaker changing state.
	BreakerState(dest string, state gobreaker.State)
	// StoreError is a failed queue operation: op is lease, settle, pause
	// (writing a 410's pause), paused (reading the pause) or trim (the
	// history's, TrimHistory).
	StoreError(dest, op string)
	// Enqueued is an enqueue: result is queued, duplicate (found
	// enqueued already), or unrouted (an event no destination subscribes
	// to; dest is "").
	Enqueued(dest, result string)
}

// Sender delivers the envelopes of its destinations. Create it with New,
// run it with Run; Enqueue is safe to call at any time.
type Sender struct {
	queue  Queue
	cfg    Config
	dests  map[string]*destination
	order  []string
	client *http.Client
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
}

// destination is a destination's running state.
type destination struct {
	Destination
	origin  string // scheme://host[:port] of URL: what errors name
	breaker *gobreaker.DistributedCircuitBreaker[struct{}]
	shared  *sharedStore // where breaker keeps its state
	// stateKey is the name breaker's state has in shared.
	stateKey string
	// request is the template of every request to URL: its method, parsed
	// URL and host, cloned (shallowly) for each attempt.
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
	pause    pauseFlag
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
		queue: q, cfg: cfg, dests: map[string]*destination{}, now: opts.Now, logger: opts.Logger, obs: opts.Observer,
		slots:    newSlots(cfg.Workers),
		trimWake: make(chan struct{}, 1), trimStale: map[string]bool{},
		shared: newSharedStore(opts.Breakers, cfg.Breaker.Open, breakerRefresh, opts.Now),
		client: &http.Client{
			Transport: opts.Transport,
			// Redirects are never followed: a 3xx is the receiver's answer.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	if err := CheckDestinations(dests); err != nil {
		return nil, err
	}
	for _, d := range dests {
		u, err := url.Parse(d.URL)
		if err != nil {
			return nil, err // CheckDestinations parsed it
		}
		workers := d.Workers
		if workers <= 0 {
			workers = max(1, cfg.Workers/2)
		}
		workers = min(workers, cfg.Workers)
		ds := &destination{Destination: d, origin: u.Scheme + "://" + u.Host, shared: s.shared, stateKey: stateKey(d.Name), workers: workers, wake: make(chan struct{}, 1)}
		if ds.request, err = http.NewRequest(http.MethodPost, d.URL, nil); err != nil {
			return nil, fmt.Errorf("destination %q: %w", d.Name, ds.scrub(err))
		}
		if d.Rate > 0 {
			ds.limiter = rate.NewLimiter(d.Rate, max(d.Burst, 1))
		}
		name := d.Name
		ds.breaker, err = gobreaker.NewDistributedCircuitBreaker[struct{}](s.shared, gobreaker.Settings{
			Name:        name,
			MaxRequests: uint32(cfg.Breaker.HalfOpen),
			Timeout:     cfg.Breaker.Open,
			// ConsecutiveFailures alone, and no Interval: what lets
			// deliver leave a steady breaker's successes uncounted
			// (sharedStore.outcome).
			ReadyToTrip: func(c gobreaker.Counts) bool {
				return c.ConsecutiveFailures >= uint32(cfg.Breaker.Failures)
			},
			// Only what Classify counts as a failure counts against a
			// destination (deliver leaves out what it does not count): a
			// permanent 4xx is the receiver answering.
			IsSuccessful: func(err error) bool { return !errors.Is(err, errTransient) },
			OnStateChange: func(_ string, from, to gobreaker.State) {
				s.logger.Info("destination breaker", "destination", name, "from", from.String(), "to", to.String())
				s.obs.BreakerState(name, to)
			},
		})
		if err != nil {
			return nil, fmt.Errorf("destination %q breaker: %w", d.Name, err)
		}
		s.dests[d.Name] = ds
		s.order = append(s.order, d.Name)
	}
	return s, nil
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
func (s *Sender) Destinations() []string { return append([]string(nil), s.order...) }

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
	d, ok := s.dests[dest]
	if !ok {
		return 0, false
	}
	return d.state(), true
}

// state is d's breaker state; reading it writes nothing.
func (d *destination) state() gobreaker.State { return d.shared.state(d.stateKey, time.Now()) }

// ErrUnknownDestination means an envelope names no configured destination.
var ErrUnknownDestination = errors.New("unknown destination")

// Enqueue queues e for delivery: idempotent by e.ID within its
// destination. CreatedAt and NextAt default to now. Callers check the ID
// first (CheckID): a request that cannot carry it is dead on its first
// attempt. An error leaves the outcome unknown (the store may have
// applied it). The Observer is told of each enqueue applied.
func (s *Sender) Enqueue(ctx context.Context, e *Envelope) (EnqueueResult, error) {
	d, ok := s.dests[e.Destination]
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
	if err == nil && !res.Duplicate {
		select {
		case d.wake <- struct{}{}:
		default:
		}
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
	var workers sync.WaitGroup
	defer workers.Wait()
	for _, name := range s.order {
		d := s.dests[name]
		workers.Go(func() { s.runDestination(ctx, d) })
	}
}

// recordFirstSeen records when the store first saw each destination
// (Queue.FirstSeen), retrying until the store answers or ctx ends: a
// fan-out completes an event only for the destinations seen before it.
func (s *Sender) recordFirstSeen(ctx context.Context) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 30*time.Second) {
		if s.seen.Load() || ctx.Err() != nil {
			return
		}
		if _, err := s.queue.FirstSeen(ctx, s.order, s.now()); err == nil {
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

// job is a leased envelope, and its lease's end by this instance's
// clock: the lease end the store gives (LeaseUntil) is by the store's
// clock and only its fencing token, never compared with time here. The
// local end is taken conservatively, from just before the Lease call.
type job struct {
	Leased
	deadline time.Time
}

// outcome is an Outcome to settle, and its lease's local end.
type outcome struct {
	Outcome
	deadline time.Time
}

// runDestination leases and delivers one destination's envelopes. Its
// workers (the destination's cap) take leased envelopes from a prefetch
// buffer as large as their number; the loop refills it in batches once
// half of it is free, so a busy destination costs one lease round trip per
// batch, and holds at most twice its workers' worth of leases.
//
// Lease deadlines and refresh intervals are measured on this process's
// clock (time.Now); Options.Now dates what is stored.
func (s *Sender) runDestination(ctx context.Context, d *destination) {
	outcomes := make(chan outcome, 2*d.workers+s.cfg.Batch)
	var settled sync.WaitGroup
	settled.Go(func() { s.settleLoop(d.Name, outcomes) })
	workers := d.prefetch(s.cfg)
	ready := make(chan job, workers)
	room := make(chan struct{}, 1) // a worker took from ready
	var out atomic.Int64           // leased and not yet settled: in ready, or being delivered
	var pool sync.WaitGroup
	for range workers {
		pool.Go(func() {
			for j := range ready {
				select {
				case room <- struct{}{}:
				default:
				}
				outcomes <- outcome{s.work(ctx, d, j), j.deadline}
				out.Add(-1)
			}
		})
	}
	defer func() {
		close(ready) // the workers release what is left in it
		pool.Wait()
		close(outcomes)
		settled.Wait()
	}()

	idle := 10 * time.Millisecond
	for ctx.Err() == nil {
		if d.pause.get() {
			// Nothing is leased while paused. A resume through this
			// sender wakes d; one made elsewhere is read from the store
			// at each poll.
			s.wait(ctx, d, s.cfg.Poll)
			s.refreshPause(ctx, d)
			continue
		}
		if out.Load() > 0 {
			// A pause made elsewhere holds what is leased here.
			s.refreshPause(ctx, d)
		}
		want := max(1, cap(ready)/2)
		switch d.state() {
		case gobreaker.StateOpen:
			// Nothing is leased while the breaker is open: no attempt is
			// made and none charged.
			s.wait(ctx, d, breakerRefresh)
			continue
		case gobreaker.StateHalfOpen:
			// Trials only: lease that many once nothing else is out.
			if out.Load() > 0 {
				s.wait(ctx, d, 10*time.Millisecond)
				continue
			}
			want = min(s.cfg.Breaker.HalfOpen, cap(ready))
		}
		free := cap(ready) - len(ready)
		if free < want {
			t := time.NewTimer(min(breakerRefresh, pauseRefresh)) // and look at the breaker and the pause again
			select {
			case <-room:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		n := min(free, s.cfg.Batch)
		if d.state() == gobreaker.StateHalfOpen {
			n = min(n, s.cfg.Breaker.HalfOpen)
		}
		deadline := time.Now().Add(s.cfg.Lease)
		leased, err := s.queue.Lease(context.WithoutCancel(ctx), d.Name, n, s.now(), s.cfg.Lease)
		if err != nil {
			s.logger.Error("leasing envelopes", "destination", d.Name, "leased", len(leased), "error", err)
			s.obs.StoreError(d.Name, "lease")
			if len(leased) == 0 {
				s.wait(ctx, d, time.Second)
				continue
			}
			// What was leased beside the error (an entry set aside, say)
			// is delivered.
		}
		if len(leased) == 0 {
			s.wait(ctx, d, idle)
			idle = min(2*idle, s.cfg.Poll)
			continue
		}
		idle = 10 * time.Millisecond
		out.Add(int64(len(leased))) // counted before a worker can take one
		for _, l := range leased {
			ready <- job{l, deadline} // there is room: only this loop fills it
		}
	}
}

// work makes what it can of one leased envelope: it is released
// unattempted when the sender stops, the destination is paused, or no slot
// comes in time; else deliver has it.
func (s *Sender) work(ctx context.Context, d *destination, j job) Outcome {
	release := Outcome{Kind: Release, ID: j.ID, LeaseUntil: j.LeaseUntil}
	if ctx.Err() != nil || d.pause.get() || !s.takeSlot(ctx, d, s.latestStart(j)) {
		return release
	}
	defer s.slots.release(d.Name)
	return s.deliver(ctx, d, j)
}

// latestStart is the latest j's attempt may start: its timeout and the
// settle margin must fit in its lease.
func (s *Sender) latestStart(j job) time.Time {
	return j.deadline.Add(-s.cfg.Timeout - settleMargin(s.cfg.Lease))
}

// takeSlot takes a global worker slot, and a token of d's rate while it
// holds the slot, so that no more than the rate is ever sent, even when
// slots were scarce. A worker waiting for the rate gives its slot back
// meanwhile: it holds nothing the other destinations need. False when ctx
// ends first, or when the attempt could not start by latest: then no
// token is taken. A rate that would make it wait past latest is waited for
// until latest, and no further: the lease is released then, not at once,
// so that it is not leased again and again meanwhile.
func (s *Sender) takeSlot(ctx context.Context, d *destination, latest time.Time) bool {
	for {
		if time.Now().After(latest) || !s.slots.acquire(ctx, d.Name) {
			return false
		}
		if time.Now().After(latest) {
			s.slots.release(d.Name)
			return false
		}
		if d.limiter == nil {
			return true
		}
		r := d.limiter.Reserve()
		wait := r.Delay()
		if wait == 0 {
			return true
		}
		r.Cancel()
		s.slots.release(d.Name)
		t := time.NewTimer(min(wait, time.Until(latest)+time.Millisecond))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// slots is the global cap on deliveries in flight, shared fairly: a freed
// slot goes to the waiting destination that holds the fewest (the longest
// waiting among equals), so that a slow destination cannot keep every slot
// from the others.
type slots struct {
	mu      sync.Mutex
	free    int
	held    map[string]int // slots each destination holds
	waiting []*slotWaiter  // in arrival order
}

type slotWaiter struct {
	dest  string
	given chan struct{} // closed when the slot is handed over
}

func newSlots(n int) *slots { return &slots{free: n, held: map[string]int{}} }

// acquire takes a slot for dest, waiting for one; false when ctx ends
// first.
func (sl *slots) acquire(ctx context.Context, dest string) bool {
	sl.mu.Lock()
	if sl.free > 0 { // then no one waits: a freed slot is handed over
		sl.free--
		sl.held[dest]++
		sl.mu.Unlock()
		return true
	}
	w := &slotWaiter{dest: dest, given: make(chan struct{})}
	sl.waiting = append(sl.waiting, w)
	sl.mu.Unlock()
	select {
	case <-w.given:
		return true
	case <-ctx.Done():
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	select {
	case <-w.given: // handed over meanwhile: pass it on
		sl.releaseLocked(dest)
	default:
		sl.waiting = slices.DeleteFunc(sl.waiting, func(o *slotWaiter) bool { return o == w })
	}
	return false
}

// release gives back a slot of dest.
func (sl *slots) release(dest string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.releaseLocked(dest)
}

func (sl *slots) releaseLocked(dest string) {
	sl.held[dest]--
	if len(sl.waiting) == 0 {
		sl.free++
		return
	}
	next := 0
	for i, w := range sl.waiting {
		if sl.held[w.dest] < sl.held[sl.waiting[next].dest] {
			next = i
		}
	}
	w := sl.waiting[next]
	sl.waiting = slices.Delete(sl.waiting, next, next+1)
	sl.held[w.dest]++
	close(w.given)
}

// prefetch is how many workers a destination runs, and how many leased
// envelopes it holds ready for them: its workers, and for a rate-limited
// one no more than it attempts in a third of the time an envelope may
// wait for its attempt (its lease less the timeout and the settle margin),
// so that what it holds (workers waiting for the rate, and the buffer) is
// attempted in two thirds of that time.
func (d *destination) prefetch(cfg Config) int {
	n := d.workers
	if d.limiter != nil {
		room := cfg.Lease - cfg.Timeout - settleMargin(cfg.Lease)
		n = min(n, max(1, int(float64(d.limiter.Limit())*room.Seconds()/3)))
	}
	return n
}

// wait sleeps up to d, or until ctx ends or an enqueue wakes d.
func (s *Sender) wait(ctx context.Context, dst *destination, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-dst.wake:
	}
}

// pauseFlag is a destination's pause as this instance knows it: set at
// once by this instance (a 410, SetPaused), and read from the store
// (refreshPause) to see what other instances did. A read never undoes a
// change made here after it began, nor one still being written.
type pauseFlag struct {
	mu      sync.Mutex
	paused  bool
	version uint64    // bumped by every change made here
	writing int       // changes made here, being written to the store
	read    time.Time // when the store was last read
}

func (p *pauseFlag) get() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// hold sets the flag at once, for a change about to be written to the
// store, and says what it was. Call written when the write is done.
func (p *pauseFlag) hold(paused bool) (was bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	was, p.paused = p.paused, paused
	p.version++
	p.writing++
	return was
}

// written ends a hold; revert puts back the value it found (the write
// failed).
func (p *pauseFlag) written(revert, was bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writing--
	p.version++
	if revert {
		p.paused = was
	}
}

// refreshPause reads d's pause from the store, unless it did less than
// pauseRefresh ago.
func (s *Sender) refreshPause(ctx context.Context, d *destination) {
	p := &d.pause
	p.mu.Lock()
	if time.Since(p.read) < pauseRefresh || p.writing > 0 {
		p.mu.Unlock()
		return
	}
	p.read = time.Now()
	v := p.version
	p.mu.Unlock()
	paused, _, err := s.queue.Paused(context.WithoutCancel(ctx), d.Name)
	if err != nil {
		s.logger.Error("reading whether a destination is paused", "destination", d.Name, "error", err)
		s.obs.StoreError(d.Name, "paused")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.version == v && p.writing == 0 {
		p.paused = paused
	}
}

// SetPaused pauses or resumes dest, for this instance at once (no attempt
// starts here once it returns) and in the store, for every instance (the
// others see it within about pauseRefresh while they hold leases). A
// pause records by, who made it; a resume with a by resumes only a pause
// that by made (ErrPausedByOther), one without resumes any. A resume wakes
// the destination's workers.
func (s *Sender) SetPaused(ctx context.Context, dest string, paused bool, by string) error {
	d, ok := s.dests[dest]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownDestination, dest)
	}
	if !paused && by != "" {
		// A resume only of by's pause: the flag waits for the store's yes.
		if err := s.queue.SetPaused(ctx, dest, false, by); err != nil {
			return err
		}
		d.pause.written(false, d.pause.hold(false))
		s.Wake(dest)
		return nil
	}
	was := d.pause.hold(paused)
	err := s.queue.SetPaused(ctx, dest, paused, by)
	d.pause.written(err != nil, was)
	if err != nil {
		return err
	}
	if !paused {
		s.Wake(dest)
	}
	return nil
}

// errTransient marks a failure the breaker counts.
var errTransient = errors.New("transient failure")

// deliver makes one attempt and returns its outcome. It makes none (the
// envelope is released, nothing charged) when the destination is paused or
// its breaker open, or when the attempt's timeout and the settle margin
// no longer fit in the lease.
func (s *Sender) deliver(ctx context.Context, d *destination, j job) Outcome {
	release := Outcome{Kind: Release, ID: j.ID, LeaseUntil: j.LeaseUntil}
	if d.pause.get() {
		// Paused (maybe by a 410 in flight beside it) since the lease.
		return release
	}
	if d.state() == gobreaker.StateOpen {
		// Opened (maybe by another instance) since the lease.
		return release
	}
	if time.Now().After(s.latestStart(j)) {
		// It waited (for the rate, for a worker) so long that its attempt
		// could outlive the lease, and another worker deliver it too.
		return release
	}
	e := j.Envelope
	start := s.now()
	res := s.attempt(d, e, start)
	// The attempt is counted after it is made, so that the breaker's lock
	// is never held across a request. Execute's error is only the outcome
	// handed to it, or its refusal to count one while open. Every counted
	// outcome goes into this instance's report on the destination; a
	// success that changes nothing the breaker decides by goes there
	// alone (sharedStore.outcome).
	if res.Breaker != BreakerNotCounted && !d.shared.outcome(d.stateKey, res.Breaker == BreakerSuccess, s.now()) {
		failed := res.Breaker == BreakerFailure
		_, _ = d.breaker.Execute(func() (struct{}, error) {
			if failed {
				return struct{}{}, errTransient
			}
			return struct{}{}, nil
		})
	}
	now := s.now()
	latency := now.Sub(start)
	switch {
	case res.Delivered:
		s.obs.Attempt(d.Name, "2xx", latency)
		s.obs.Delivered(d.Name, now.Sub(e.CreatedAt))
		// The history shows the answer that delivered it.
		e.LastStatus, e.LastError, e.Class = e.Log[len(e.Log)-1].Status, "", ClassNone
		return Outcome{Kind: Delivered, ID: j.ID, LeaseUntil: j.LeaseUntil, Envelope: e}
	case res.Transient:
		s.obs.Attempt(d.Name, "transient", latency)
	default:
		s.obs.Attempt(d.Name, "permanent", latency)
	}
	next := *e
	if res.Transient && next.Attempts < s.cfg.Attempts {
		next.NextAt = now.Add(s.cfg.Backoff.Delay(next.Attempts, res.RetryAfter))
		return Outcome{Kind: Retry, ID: j.ID, LeaseUntil: j.LeaseUntil, Envelope: &next}
	}
	next.DeadAt = now
	s.obs.Dead(d.Name, now.Sub(firstFailure(&next)))
	if res.Pause {
		s.pauseGone(ctx, d)
	}
	return Outcome{Kind: Dead, ID: j.ID, LeaseUntil: j.LeaseUntil, Envelope: &next}
}

// pauseGone pauses d after a 410: here at once, so that no other attempt
// starts, then in the store. The attempts already in flight that meet a
// 410 too dead-letter their own envelopes and leave the pause to the
// first. If the store cannot be written, d stays paused here until the
// store is read again: its next attempt may meet the 410 and try again.
func (s *Sender) pauseGone(ctx context.Context, d *destination) {
	was := d.pause.hold(true)
	defer d.pause.written(false, was)
	if was {
		return
	}
	if err := s.queue.SetPaused(context.WithoutCancel(ctx), d.Name, true, PausedByGone); err != nil {
		s.logger.Error("pausing a gone destination", "destination", d.Name, "error", err)
		s.obs.StoreError(d.Name, "pause")
		return
	}
	s.logger.Warn("destination answered 410 Gone: paused until an operator resumes it", "destination", d.Name)
}

// firstFailure is when the envelope's current run of attempts first
// failed.
func firstFailure(e *Envelope) time.Time {
	for i := len(e.Log) - 1; i >= 0; i-- {
		if i == 0 || e.Log[i-1].RedriveID != e.Log[i].RedriveID {
			return e.Log[i].At
		}
	}
	return e.CreatedAt
}

// maxErrorText bounds the error text kept per attempt.
const maxErrorText = 512

// attempt sends e once and records the attempt in e (Attempts, Log, the
// last status, error and class). It returns the classified result.
func (s *Sender) attempt(d *destination, e *Envelope, start time.Time) Result {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	status, header, said, err := s.post(ctx, d, e, start)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && err != nil {
		err = fmt.Errorf("%w after %s", errTimeout, s.cfg.Timeout)
	}
	res := Classify(status, header, err, s.now())
	e.Attempts++
	a := Attempt{At: start, Status: status, Latency: s.now().Sub(start), RedriveID: e.RedriveID}
	switch {
	case err != nil:
		a.Error = err.Error()
	case !res.Delivered:
		a.Error = http.StatusText(status)
		if said != "" {
			a.Error += ": " + said
		}
	}
	if len(a.Error) > maxErrorText {
		a.Error = strings.ToValidUTF8(a.Error[:maxErrorText], "")
	}
	e.Log = append(e.Log, a)
	if !res.Delivered {
		e.LastStatus, e.LastError, e.Class = status, a.Error, res.Class
	}
	return res
}

// post sends e's payload, signed, and reads the answer's status and
// headers (the body is drained, up to a bound, so the connection is
// reused). Of a failure's body it keeps the start, as one line of text:
// what the receiver said is what a person triaging needs. Its errors name
// the destination by d.origin only.
func (s *Sender) post(ctx context.Context, d *destination, e *Envelope, now time.Time) (int, http.Header, string, error) {
	req := d.newRequest(ctx, e.Payload)
	var err error
	if req.Header, err = d.header(e, now); err != nil {
		return 0, nil, "", &requestError{fmt.Errorf("signing: %w", err)}
	}
	if err := checkHeader(req.Header); err != nil {
		return 0, nil, "", &requestError{err}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if refused(err) {
			err = &requestError{err}
		}
		return 0, nil, "", d.scrub(err)
	}
	defer func() { _ = resp.Body.Close() }() // a response body: nothing to flush
	said := ""
	if resp.StatusCode >= 300 {
		head := make([]byte, maxSaid)
		n, _ := io.ReadFull(resp.Body, head)
		said = oneLine(head[:n])
	}
	if resp.Body != http.NoBody {
		// Drained for the connection's reuse; the status is the answer.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	}
	return resp.StatusCode, resp.Header, said, nil
}

// newRequest is a POST of payload to d, as http.NewRequestWithContext
// makes it, from d's template: the URL is parsed once, not at each
// attempt. GetBody lets the transport send it again when a kept-alive
// connection turns out closed before anything was written.
func (d *destination) newRequest(ctx context.Context, payload []byte) *http.Request {
	req := d.request.WithContext(ctx)
	req.ContentLength = int64(len(payload))
	if len(payload) == 0 {
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
		return req
	}
	req.Body = io.NopCloser(bytes.NewReader(payload))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(payload)), nil }
	return req
}

// scrub makes err name only d's scheme://host[:port]: Go's *url.Error
// prints the whole URL, whose user info, path and query may hold secrets.
func (d *destination) scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = d.origin
	}
	return err
}

// checkHeader refuses a header the transport would refuse: a name that is
// not a token, or a value holding a control character (a delivery ID with
// CR LF, signed into a header, say). Values are not quoted: one may hold a
// signature.
func checkHeader(h http.Header) error {
	for k, vs := range h {
		if k == "" || strings.IndexFunc(k, func(r rune) bool { return r >= 0x80 || !isTokenByte(byte(r)) }) >= 0 {
			return fmt.Errorf("invalid header field name %q", k)
		}
		for _, v := range vs {
			if strings.IndexFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) >= 0 {
				return fmt.Errorf("invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// isTokenByte reports whether c may be in an HTTP token (RFC 9110).
func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// refused reports an error of the transport refusing the request itself
// (Go gives these no type): class request, as checkHeader's.
func refused(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "net/http: invalid header") || strings.HasPrefix(msg, "net/http: invalid trailer") ||
		strings.HasPrefix(msg, "net/http: invalid method")
}

// maxSaid is how much of a failed answer's body an attempt keeps.
const maxSaid = 200

// oneLine is b as printable, valid UTF-8 on one line: control characters
// become spaces, runs of space one, a rune cut at the end dropped.
func oneLine(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), ""))
	return strings.Join(strings.Fields(s), " ")
}

// header is the header of e's request to d at now: the destination's
// own, the payload's content type (unless the destination sets one), the
// signature, the trace context and the redrive ID.
func (d *destination) header(e *Envelope, now time.Time) (http.Header, error) {
	d.baseOnce.Do(func() {
		d.base = make(http.Header, len(d.Header)+2)
		for k, v := range d.Header {
			d.base[k] = v
		}
		d.hasCT = d.base.Get("Content-Type") != ""
		d.base.Set("User-Agent", "hookgate")
	})
	h := make(http.Header, len(d.base)+6)
	for k, v := range d.base {
		h[k] = v
	}
	if !d.hasCT {
		if e.ContentType == "" || e.ContentType == "application/json" {
			h["Content-Type"] = contentTypeJSON
		} else {
			h["Content-Type"] = []string{e.ContentType}
		}
	}
	if d.Signer != nil {
		// The signature comes after the headers it may cover (rfc9421).
		sig, err := d.Signer.SignRequest(verify.Request{Method: http.MethodPost, URL: d.URL, Header: h, Body: e.Payload}, e.ID, now)
		if err != nil {
			return nil, err
		}
		for k, v := range sig {
			h[k] = v
		}
	}
	if e.TraceParent != "" {
		h.Set("Traceparent", e.TraceParent)
		if e.TraceState != "" {
			h.Set("Tracestate", e.TraceState)
		}
	}
	if e.RedriveID != "" {
		h.Set("Hookgate-Redrive-Id", e.RedriveID)
	}
	return h, nil
}

// contentTypeJSON is the Content-Type of a JSON payload, shared by every
// request's header: never modified.
var contentTypeJSON = []string{"application/json"}

// settleLoop settles outcomes in batches: it takes what has arrived while
// the previous batch was being written, so a busy destination costs one
// store round trip per batch, and an idle one adds no delay.
func (s *Sender) settleLoop(dest string, outcomes <-chan outcome) {
	batch := make([]Outcome, 0, 256)
	for o := range outcomes {
		batch = append(batch[:0], o.Outcome)
		deadline := o.deadline
	drain:
		for len(batch) < cap(batch) {
			select {
			case o, ok := <-outcomes:
				if !ok {
					break drain
				}
				batch = append(batch, o.Outcome)
				deadline = later(deadline, o.deadline)
			default:
				break drain
			}
		}
		s.settle(dest, batch, deadline)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// settle writes a batch, retrying a store failure until the batch's last
// lease would have ended anyway (deadline, by this instance's clock).
func (s *Sender) settle(dest string, batch []Outcome, deadline time.Time) {
	backoff := 50 * time.Millisecond
	for {
		skipped, err := s.queue.Settle(context.Background(), dest, batch, s.now())
		if err != nil {
			s.obs.StoreError(dest, "settle")
		}
		if err == nil {
			if skipped > 0 {
				s.logger.Warn("outcomes skipped: their lease had expired and the envelopes were leased again", "destination", dest, "skipped", skipped)
			}
			s.trimmed(dest)
			return
		}
		if !time.Now().Add(backoff).Before(deadline) {
			s.logger.Error("settling outcomes failed until their leases ended: they will be delivered again", "destination", dest, "outcomes", len(batch), "error", err)
			return
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

type nopObserver struct{}

func (nopObserver) Attempt(string, string, time.Duration) {}
func (nopObserver) Delivered(string, time.Duration)       {}
func (nopObserver) Dead(string, time.Duration)            {}
func (nopObserver) BreakerState(string, gobreaker.State)  {}
func (nopObserver) StoreError(string, string)             {}
func (nopObserver) Enqueued(string, string)               {}

// Wake makes dest look for due envelopes at once (after a resume or a
// redrive).
func (s *Sender) Wake(dest string) {
	if d, ok := s.dests[dest]; ok {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}
