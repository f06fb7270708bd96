// Package dedupe holds the dedupe rule a webhook receiver needs in front
// of it, and the store interface it needs.
//
// [Deduper] runs the claim → forward → record → replay state machine, so
// that a receiver sees each delivery once: the first copy of a key is
// claimed (a lease, a fencing token, the body's fingerprint) and
// forwarded; its final response is recorded; every later copy gets the
// record replayed. Its backend is a [Store].
//
// The stale-event rule is its subpackage freshness. The redisstore and
// boltstore packages implement both rules' store interfaces, and pass the
// one conformance suite in storetest. It imports no Caddy.
package dedupe

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/hookgate/hookgate/dedupe/internal/lease"
)

// Defaults of Config.
const (
	DefaultLease     = 30 * time.Second
	DefaultRetention = 168 * time.Hour
	DefaultMaxRecord = 64 << 10
)

// Errors a Decision carries when a copy is rejected.
var (
	// ErrInFlight means another copy of the key is being forwarded.
	ErrInFlight = errors.New("a copy of this delivery is in flight")
	// ErrKeyReused means the key was first used with another body.
	ErrKeyReused = errors.New("idempotency key reused with a different payload")
)

// Config tunes a Deduper.
type Config struct {
	// Lease bounds a claim: a forward that has not recorded by then is
	// presumed dead, and the next copy is forwarded again. Default 30s.
	Lease time.Duration
	// Retention is how long a record is kept, from the time it is
	// recorded. Default 168h.
	Retention time.Duration
	// Wait is how long a copy waits for an in-flight forward to record
	// before it is rejected with ErrInFlight. Zero rejects at once.
	Wait time.Duration
	// Final reports whether a response status is a final outcome, to be
	// recorded; others release the claim. Default: 2xx only.
	Final func(status int) bool
	// MaxRecord is the largest response body recorded. A final response
	// with a larger body is recorded without it. Default 64 KiB.
	MaxRecord int
	// ReplayCache is how many records (with bodies up to 4 KiB) are kept
	// in memory to replay without a store round trip, within
	// ReplayCacheBytes in all. Records never change once written, only
	// expire or are forgotten by an operator, so a cached one is replayed
	// until its expiry, and for at most ReplayCacheTTL. Default 10000;
	// negative disables it.
	ReplayCache int
}

// FinalClasses is the Config.Final of the status classes whose answers
// are recorded ("2xx", "3xx", "4xx": webhook_dedupe's record), or the
// error that refuses a class. A 5xx is never final: the sender must
// retry it. Nor are the statuses that ask for a retry whatever their
// class: a timeout (408), too early (425) and a rate limit (429).
func FinalClasses(classes []string) (func(status int) bool, error) {
	var final [6]bool
	for _, class := range classes {
		switch class {
		case "2xx", "3xx", "4xx":
			final[class[0]-'0'] = true
		case "5xx":
			return nil, errors.New("record 5xx: a server error is never final, the sender must retry it")
		default:
			return nil, fmt.Errorf("record %q: want status classes 2xx, 3xx or 4xx", class)
		}
	}
	return func(status int) bool {
		switch status {
		case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
			return false
		}
		return status >= 100 && status < 600 && final[status/100]
	}, nil
}

// Bounds of the replay cache.
const (
	DefaultReplayCache = 10000
	// ReplayCacheBytes bounds the cache's keys, headers and bodies.
	ReplayCacheBytes = 32 << 20
	// ReplayCacheTTL is how long a record is replayed from memory: a record
	// forgotten in the store is forwarded again after at most this long.
	ReplayCacheTTL = time.Minute
	maxCachedBody  = 4 << 10
	// maxCachedRequest is the largest request body a cached record keeps
	// beside its fingerprint: a copy whose body is kept is told a
	// duplicate by comparing the bodies, without hashing its own.
	maxCachedRequest = 4 << 10
)

// MaxKeyLen is the longest idempotency key (and freshness entity) the
// stores accept, in bytes.
const MaxKeyLen = 1024

// cachedRecord is a record held in the replay cache, ready to replay.
type cachedRecord struct {
	fp Fingerprint
	// body is the request body whose fingerprint fp is, when hasBody: kept
	// (up to maxCachedRequest) so that a copy is compared byte for byte
	// instead of hashed. Equal bodies have equal fingerprints, and
	// different ones different fingerprints, so the answer is the same.
	body    []byte
	hasBody bool
	rec     *Record
	// header is rec's header laid out for replays, on the first one: most
	// records cached are never replayed.
	header  atomic.Pointer[replayHeader]
	expires time.Time
	size    int64
}

// layout is c's replay header, laid out on first use (racing callers lay
// out equal ones: one is kept).
func (c *cachedRecord) layout() *replayHeader {
	if p := c.header.Load(); p != nil {
		return p
	}
	c.header.CompareAndSwap(nil, newReplayHeader(c.rec))
	return c.header.Load()
}

// Deduper runs the state machine over a Store. It is safe for concurrent use.
type Deduper struct {
	deps
	store   Store
	cfg     Config
	records *lru.Cache[string, *cachedRecord] // nil when disabled
	bytes   atomic.Int64                      // the cache's size
	// releases bounds the background releases of claims whose reply was
	// lost (see BeginBody).
	releases lease.Releases
}

// deps are what a Deduper takes from outside: clock, token source, and
// sleep.
type deps struct {
	now   func() time.Time
	token func() string
	sleep func(ctx context.Context, d time.Duration) error
}

func newDeps(opts []Option) deps {
	d := deps{now: time.Now, token: randomToken, sleep: lease.Sleep}
	for _, o := range opts {
		o(&d)
	}
	return d
}

// Option configures a Deduper.
type Option func(*deps)

// WithClock sets the clock; the default is time.Now.
func WithClock(now func() time.Time) Option { return func(d *deps) { d.now = now } }

// New returns a Deduper over store.
func New(store Store, cfg Config, opts ...Option) (*Deduper, error) {
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxRecord == 0 {
		cfg.MaxRecord = DefaultMaxRecord
	}
	if cfg.Final == nil {
		cfg.Final = func(status int) bool { return status >= 200 && status < 300 }
	}
	switch {
	case cfg.Lease < time.Second:
		return nil, fmt.Errorf("lease %s is under 1s", cfg.Lease)
	case cfg.Retention < cfg.Lease:
		return nil, fmt.Errorf("retention %s is shorter than the lease %s", cfg.Retention, cfg.Lease)
	case cfg.Wait < 0 || cfg.MaxRecord < 0:
		return nil, errors.New("wait and max_record must not be negative")
	}
	if cfg.ReplayCache == 0 {
		cfg.ReplayCache = DefaultReplayCache
	}
	d := &Deduper{deps: newDeps(opts), store: store, cfg: cfg, releases: lease.NewReleases()}
	if cfg.ReplayCache > 0 {
		d.records, _ = lru.NewWithEvict(cfg.ReplayCache, func(_ string, c *cachedRecord) { d.bytes.Add(-c.size) })
	}
	return d, nil
}

func randomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Action says what to do with a copy.
type Action int

// The actions.
const (
	Forward Action = iota + 1 // forward it, then Finish
	Replay                    // answer with Decision.Record
	Reject                    // answer with Decision.Err
)

// Decision is BeginBody's answer for one copy.
type Decision struct {
	Action Action
	// Result names the outcome for metrics: forwarded, lease_expired
	// (forwarded again over an expired lease), replayed, in_flight or
	// mismatch.
	Result string
	// Token is the claim Finish records or releases, and Fingerprint the
	// body's (Forward).
	Token       string
	Fingerprint Fingerprint
	// LeaseUntil bounds the forward (Forward), or is when the claim in the
	// way expires (Reject with ErrInFlight).
	LeaseUntil time.Time
	// Record is the response to replay (Replay).
	Record *Record
	// Err is ErrInFlight or ErrKeyReused (Reject).
	Err error

	// header is Record's header laid out for replay, when the record came
	// from the replay cache (Replay).
	header *replayHeader
	// body is the forwarded copy's body, when BeginBody had it: Finish
	// keeps it in the replay cache beside the record (Forward).
	body    []byte
	hasBody bool
}

// Replay answers w with the decision's record (Action Replay), as
// Record.Replay does; from the replay cache, its header is written from a
// prepared layout.
func (d *Decision) Replay(w http.ResponseWriter) {
	if d.header != nil {
		d.header.write(w, d.Record)
		return
	}
	d.Record.Replay(w)
}

// RetryAfter is how long until the lease in the way expires.
func (d Decision) RetryAfter(now time.Time) time.Duration {
	return max(d.LeaseUntil.Sub(now), 0)
}

// Lease returns the configured lease.
func (d *Deduper) Lease() time.Duration { return d.cfg.Lease }

// MaxRecord is the largest response body recorded (Config.MaxRecord, or
// its default).
func (d *Deduper) MaxRecord() int64 { return int64(d.cfg.MaxRecord) }

// BeginBody decides what to do with a copy of key whose body is body.
// With Config.Wait set, a copy that finds another in flight waits for its
// record (or for its claim to go) up to Wait. A non-nil error is a store
// failure: nothing was claimed. A copy replayed from the replay cache is
// compared with the body kept there, byte for byte, and its own
// fingerprint is not computed at all. sum returns the
// body's fingerprint (FingerprintOf(body)), for a caller that may have it
// already (the SHA-256 of a placeholder); it is called at most once, and
// when nil the fingerprint is computed here.
func (d *Deduper) BeginBody(ctx context.Context, key string, body []byte, sum func() Fingerprint) (Decision, error) {
	return d.begin(ctx, key, &copyOf{body: body, hasBody: true}, sum)
}

// copyOf is the copy BeginBody decides about: its fingerprint, computed once
// when first needed, and its body when at hand.
type copyOf struct {
	body    []byte
	hasBody bool
	fp      Fingerprint
	known   bool
}

// fingerprint is the copy's fingerprint: given, or sum's when sum is not
// nil, or computed from the body. (sum is not kept in c: what c holds
// goes on in the Decision, and sum need not.)
func (c *copyOf) fingerprint(sum func() Fingerprint) Fingerprint {
	if !c.known {
		if sum != nil {
			c.fp = sum()
		} else {
			c.fp = FingerprintOf(c.body)
		}
		c.known = true
	}
	return c.fp
}

// matches reports whether the copy is of the cached record's body.
func (c *copyOf) matches(r *cachedRecord, sum func() Fingerprint) bool {
	if c.hasBody && r.hasBody {
		return bytes.Equal(c.body, r.body)
	}
	return c.fingerprint(sum) == r.fp
}

func (d *Deduper) begin(ctx context.Context, key string, cp *copyOf, sum func() Fingerprint) (Decision, error) {
	if c, ok := d.cached(key); ok {
		if !cp.matches(c, sum) {
			return Decision{Action: Reject, Result: "mismatch", Err: ErrKeyReused}, nil
		}
		return Decision{Action: Replay, Result: "replayed", Record: c.rec, header: c.layout()}, nil
	}
	fp := cp.fingerprint(sum)
	deadline := d.now().Add(d.cfg.Wait)
	poll := 5 * time.Millisecond
	for {
		now := d.now()
		token := d.token()
		res, err := d.store.Claim(ctx, key, Claim{Fingerprint: fp, Token: token, Lease: d.cfg.Lease, Retention: d.cfg.Retention, Now: now})
		if err != nil {
			// The claim may have landed although its reply was lost (a
			// timeout, the client leaving): it would hold back every retry
			// until the lease ends. Let it go once the store answers again.
			d.releaseLost(key, token, now.Add(d.cfg.Lease))
			return Decision{}, err
		}
		switch res.Status {
		case Claimed:
			return Decision{Action: Forward, Result: "forwarded", Token: token, Fingerprint: fp, LeaseUntil: now.Add(d.cfg.Lease), body: cp.body, hasBody: cp.hasBody}, nil
		case TookOver:
			return Decision{Action: Forward, Result: "lease_expired", Token: token, Fingerprint: fp, LeaseUntil: now.Add(d.cfg.Lease), body: cp.body, hasBody: cp.hasBody}, nil
		case Recorded:
			d.remember(key, cp, res.Record, res.Expires)
			return Decision{Action: Replay, Result: "replayed", Record: res.Record}, nil
		case Mismatch:
			return Decision{Action: Reject, Result: "mismatch", Err: ErrKeyReused}, nil
		case InFlight:
		default:
			return Decision{}, fmt.Errorf("store answered claim status %d", res.Status)
		}

		// In flight: wait for the record, or for the claim to go.
		for {
			now = d.now()
			if !now.Before(deadline) {
				return Decision{Action: Reject, Result: "in_flight", Err: ErrInFlight, LeaseUntil: res.LeaseUntil}, nil
			}
			if err := d.sleep(ctx, min(poll, deadline.Sub(now))); err != nil {
				return Decision{}, err
			}
			poll = min(poll*2, 50*time.Millisecond)
			e, err := d.store.Get(ctx, key, d.now())
			if err != nil {
				return Decision{}, err
			}
			if e.State == StateRecorded && e.Fingerprint == fp {
				return Decision{Action: Replay, Result: "replayed", Record: e.Record}, nil
			}
			if e.State != StateClaimed || e.Fingerprint != fp || !d.now().Before(e.LeaseUntil) {
				break // released, expired or changed: claim again
			}
			res.LeaseUntil = e.LeaseUntil
		}
	}
}

// Response is the upstream's answer to a forward, as Finish records it.
type Response struct {
	Status int
	Header http.Header
	// Before, when set, is the response's header as it was before the
	// forward: a field of Header that holds the same values in Before is
	// the gateway's own (Server, a header directive's), not the
	// upstream's, and is not recorded. Header may then be the response's
	// whole header, filtered as it is copied.
	Before http.Header
	Body   []byte
	// Streamed is set when the body went to the client without being
	// buffered (it was over the record limit): it is recorded without it.
	Streamed bool
	// NotFinal is set when the answer is not the upstream's decision
	// whatever its status (hookgate's own answers that ask for a retry):
	// Settle abandons it.
	NotFinal bool
}

// releaseLost releases, in the background, a claim whose Claim call
// failed, retrying until the store answers or the claim's lease ends. The
// release is fenced by token, so it never touches another forward's claim.
func (d *Deduper) releaseLost(key, token string, leaseUntil time.Time) {
	// The first try waits a moment: a claim still queued in a store that
	// stalled lands before a release sent after it.
	d.releases.Release(d.sleep, leaseUntil, func(ctx context.Context) error {
		return d.store.Release(ctx, key, token)
	})
}

// Finish ends a forward: a final response is recorded, any other releases
// the claim so the next copy is forwarded. It reports whether the response
// was recorded. A store failure is retried with backoff until ctx ends;
// give ctx the lease's deadline and not the client's cancellation: the
// outcome must be kept even when the client has gone. ErrClaimLost ends it
// at once: another forward holds the key.
func (d *Deduper) Finish(ctx context.Context, key string, dec Decision, resp Response) (bool, error) {
	final := d.cfg.Final(resp.Status)
	rec := newRecord(resp, d.cfg.MaxRecord)
	if resp.Streamed {
		rec.Body, rec.BodyOmitted = nil, true
	}
	attempt := func() error {
		if !final {
			return d.store.Release(ctx, key, dec.Token)
		}
		now := d.now()
		err := d.store.Record(ctx, key, dec.Token, rec, d.cfg.Retention, now)
		if err == nil {
			d.remember(key, &copyOf{fp: dec.Fingerprint, known: true, body: dec.body, hasBody: dec.hasBody}, &rec, now.Add(d.cfg.Retention))
		}
		return err
	}
	err := attempt()
	if err != nil && !errors.Is(err, ErrClaimLost) {
		lost := false
		err = lease.Retry(ctx, d.sleep, func() error {
			err := attempt()
			if errors.Is(err, ErrClaimLost) {
				lost = true
				return nil // stop retrying
			}
			return err
		})
		if lost {
			err = ErrClaimLost
		}
	}
	return final && err == nil, err
}

// Forget deletes key's entry from the store, so the next copy is
// forwarded as new, and from this Deduper's replay cache (other
// instances' caches let it go within ReplayCacheTTL). It reports whether
// the store held one.
func (d *Deduper) Forget(ctx context.Context, key string) (bool, error) {
	d.Uncache(key)
	return d.store.Forget(ctx, key)
}

// Uncache drops key from the replay cache.
func (d *Deduper) Uncache(key string) {
	if d.records != nil {
		d.records.Remove(key)
	}
}

// cached returns key's record from the replay cache while it is live.
func (d *Deduper) cached(key string) (*cachedRecord, bool) {
	if d.records == nil {
		return nil, false
	}
	c, ok := d.records.Get(key)
	if !ok {
		return nil, false
	}
	if !d.now().Before(c.expires) {
		d.records.Remove(key)
		return nil, false
	}
	return c, true
}

// remember puts a record in the replay cache, if it is small enough, until
// it expires or for ReplayCacheTTL, whichever is sooner, with the body of
// cp when it has one no larger than maxCachedRequest (its header is laid
// out for replay on the first replay); the oldest entries go while the
// cache is over ReplayCacheBytes.
func (d *Deduper) remember(key string, cp *copyOf, rec *Record, expires time.Time) {
	if d.records == nil || rec == nil || len(rec.Body) > maxCachedBody || expires.IsZero() {
		return
	}
	size := int64(len(key) + len(rec.Body) + cachedOverhead)
	for k, vs := range rec.Header {
		size += int64(len(k))
		for _, v := range vs {
			size += int64(len(v))
		}
	}
	if size > ReplayCacheBytes/16 {
		return // a record with very large headers is not worth the room
	}
	if ttl := d.now().Add(ReplayCacheTTL); ttl.Before(expires) {
		expires = ttl
	}
	c := &cachedRecord{fp: cp.fingerprint(nil), rec: rec, expires: expires}
	if cp.hasBody && len(cp.body) <= maxCachedRequest {
		// A copy: the request's buffer is larger than its body.
		c.body, c.hasBody = append(make([]byte, 0, len(cp.body)), cp.body...), true
		size += int64(len(c.body))
	}
	c.size = size
	// Records never change: one already cached (rarely: a key is
	// remembered once it is forwarded, or read from the store on a miss)
	// stays as it is.
	if _, found, _ := d.records.PeekOrAdd(key, c); found {
		return
	}
	d.bytes.Add(size)
	for d.bytes.Load() > ReplayCacheBytes {
		if _, _, ok := d.records.RemoveOldest(); !ok {
			break
		}
	}
}

// cachedOverhead approximates a cached record's fixed cost: the entry, the
// record, its header map.
const cachedOverhead = 256

// Settlement is how Settle ended a forward.
type Settlement int

// The settlements.
const (
	// SettledAbandoned: no response at all (Response.Status 0: upstream down,
	// the deadline passed, a copy that failed before the status), or one
	// marked NotFinal. The claim was released, so the next copy is
	// forwarded.
	SettledAbandoned Settlement = iota + 1
	// SettledReleased: a response that is not final (Config.Final). The claim
	// was released, so the next copy is forwarded.
	SettledReleased
	// SettledRecorded: a final response, recorded and replayed to every later
	// copy.
	SettledRecorded
)

// Settle ends a forward, however it ended: it abandons, releases or
// records, and says which. An abandoned claim is released with one try
// (a claim left behind ends with its lease); Finish releases or records
// the others, retried until ctx ends: give ctx the lease's deadline and
// not the client's cancellation. The error is the store's (ErrClaimLost
// when another forward holds the key).
func (d *Deduper) Settle(ctx context.Context, key string, dec Decision, resp Response) (Settlement, error) {
	if resp.Status == 0 || resp.NotFinal {
		return SettledAbandoned, d.store.Release(ctx, key, dec.Token)
	}
	recorded, err := d.Finish(ctx, key, dec, resp)
	if !recorded {
		return SettledReleased, err
	}
	return SettledRecorded, err
}

// hopByHop are the headers a record leaves out: they describe one
// connection, not the response; Date and Content-Length are set afresh;
// Set-Cookie is one client's session, never to be handed to another.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Date": true, "Content-Length": true, "Set-Cookie": true,
}

// NewRecord makes the record of a final response: its end-to-end headers
// and its body, or no body when it is over maxBody.
func NewRecord(status int, header http.Header, body []byte, maxBody int) Record {
	return newRecord(Response{Status: status, Header: header, Body: body}, maxBody)
}

// newRecord is NewRecord of resp, without the fields of resp.Before; the
// values of every header are copied into one slice.
func newRecord(resp Response, maxBody int) Record {
	keep := func(k string, v []string) bool {
		return !hopByHop[http.CanonicalHeaderKey(k)] && (resp.Before == nil || !slices.Equal(resp.Before[k], v))
	}
	fields, n := 0, 0
	for k, v := range resp.Header {
		if keep(k, v) {
			fields++
			n += len(v)
		}
	}
	h := make(http.Header, fields)
	values := make([]string, 0, n)
	for k, v := range resp.Header {
		if !keep(k, v) {
			continue
		}
		var vs []string
		if len(v) > 0 {
			start := len(values)
			values = append(values, v...)
			vs = values[start:len(values):len(values)]
		}
		h[http.CanonicalHeaderKey(k)] = vs
	}
	rec := Record{Status: resp.Status, Header: h}
	if len(resp.Body) > maxBody {
		rec.BodyOmitted = true
	} else {
		rec.Body = append([]byte(nil), resp.Body...)
	}
	return rec
}

// Replay answers with the recorded response, marked Idempotent-Replayed:
// true (and Idempotent-Body-Omitted: true when its body was not kept).
func (rec *Record) Replay(w http.ResponseWriter) {
	n := len(replayMarks)
	for _, vs := range rec.Header {
		n += len(vs)
	}
	// The values of every header in one allocation.
	values := make([]string, 0, n)
	h := w.Header()
	for k, vs := range rec.Header {
		start := len(values)
		values = append(values, vs...)
		h[k] = values[start:len(values):len(values)]
	}
	for i, name := range replayMarks {
		if v, ok := rec.mark(i); ok {
			values = append(values, v)
			h[name] = values[len(values)-1 : len(values) : len(values)]
		}
	}
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Body) // a client gone away has no one to tell
}

// replayMarks are the headers a replay sets beside the record's own.
var replayMarks = [...]string{"Idempotent-Replayed", "Idempotent-Body-Omitted", "Content-Length"}

// mark returns the value of replayMarks[i] for rec, if it has one.
func (rec *Record) mark(i int) (string, bool) {
	switch i {
	case 0:
		return "true", true
	case 1:
		return "true", rec.BodyOmitted
	}
	return strconv.Itoa(len(rec.Body)), true
}

// replayHeader is a record's response header laid out once, on the
// cached record's first replay, so that each replay of it writes the header from one
// copy of a slice: the values of every name, the replay's marks
// (replayMarks) included.
type replayHeader struct {
	names  []string
	values []string
	ends   []int // names[i]'s values are values[ends[i-1]:ends[i]]
}

// newReplayHeader lays out rec's header and marks, as Replay writes them.
func newReplayHeader(rec *Record) *replayHeader {
	p := &replayHeader{}
	for k, vs := range rec.Header {
		if !slices.Contains(replayMarks[:], k) { // a mark overrides the record's own
			p.names = append(p.names, k)
			p.values = append(p.values, vs...)
			p.ends = append(p.ends, len(p.values))
		}
	}
	for i, name := range replayMarks {
		if v, ok := rec.mark(i); ok {
			p.names = append(p.names, name)
			p.values = append(p.values, v)
			p.ends = append(p.ends, len(p.values))
		}
	}
	return p
}

// write answers w with rec, its header from p.
func (p *replayHeader) write(w http.ResponseWriter, rec *Record) {
	// A copy of the values for each answer, not the cached slice itself:
	// a handler after this one may change a value in place (Caddy's header
	// directive replaces within the slice).
	values := append(make([]string, 0, len(p.values)), p.values...)
	h := w.Header()
	start := 0
	for i, name := range p.names {
		end := p.ends[i]
		h[name] = values[start:end:end]
		start = end
	}
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Body) // a client gone away has no one to tell
}

// Fingerprint is the SHA-256 of a request body: a key reused with another
// body is told apart from a genuine duplicate by it.
type Fingerprint [sha256.Size]byte

// FingerprintOf returns body's fingerprint.
func FingerprintOf(body []byte) Fingerprint { return sha256.Sum256(body) }

// String returns the fingerprint in hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }
