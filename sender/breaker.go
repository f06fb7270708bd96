package sender

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/tidwall/gjson"
)

// The breaker of each destination is gobreaker's DistributedCircuitBreaker
// over a SharedDataStore: in memory for one instance, and over Redis when
// instances share the work, so that a destination that is down opens its
// breaker on every instance.
//
// gobreaker locks the store around each request it counts. A store lock
// in Redis per delivery would serialise every delivery to a destination
// across all instances, so the shared store here locks in-process only,
// reads the shared state through a short-lived cache, and writes it behind
// through Remote, which keeps the newest state: of the latest generation
// (a state change, such as closed to open, starts a new one), then the
// most requests counted. A stale instance never undoes another's
// transition, and a transition reaches every instance within the merge
// interval (Run's 50 ms) plus the refresh interval (breakerRefresh).
//
// Only a counted attempt writes: gobreaker's own State() writes the state
// back on every call (and a new generation when the state's expiry has
// passed), so the sender reads a breaker's state with sharedStore.state,
// which writes nothing. An idle sender merges nothing into the remote.

// Remote is where a shared breaker state lives: Redis, for instances that
// share the work.
type Remote interface {
	// Load reads the state stored under name; nil when there is none.
	Load(ctx context.Context, name string) ([]byte, error)
	// Merge stores data under name unless the stored state is newer: of
	// a later generation, or of the same with more requests counted.
	Merge(ctx context.Context, name string, data []byte) error
}

// sharedStore is a gobreaker.SharedDataStore over an optional Remote.
type sharedStore struct {
	remote  Remote // nil: this instance alone
	refresh time.Duration
	now     func() time.Time

	mu      sync.Mutex
	locks   map[string]*sync.Mutex
	entries map[string]*sharedEntry
	flush   chan struct{}
}

// sharedEntry is one name's state as this instance knows it.
type sharedEntry struct {
	data    []byte
	decoded decoded // data decoded once: every delivery reads it
	fetched time.Time
	dirty   bool // written here, not yet merged into the remote
	// steady is how many successes steady took, of generation steadyGen,
	// not yet counted into data: folded in before gobreaker reads the
	// state and before the state is merged (fold).
	steady    uint32
	steadyGen uint64
}

// decoded is a stored state decoded; ok is false when it does not
// decode.
type decoded struct {
	st gobreaker.SharedState
	ok bool
}

// decode reads the fields of a state that the store compares and reads
// (state, generation, counts, expiry) with gjson, which allocates next to
// nothing: every counted attempt writes a state, and encoding/json's
// decoder cost as much as the rest of an attempt. Where encoding/json
// decodes a state, decode reads the same; anything but those fields once
// each, in the form gobreaker writes them (digits, keys as spelled), is
// left to encoding/json, as before.
func decode(data []byte) decoded {
	d := decoded{ok: gjson.ValidBytes(data)}
	seen := 0
	if d.ok {
		gjson.ParseBytes(data).ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "state":
				n, err := strconv.ParseInt(digits(v), 10, 0)
				d.st.State, d.ok = gobreaker.State(n), err == nil
			case "generation":
				n, err := strconv.ParseUint(digits(v), 10, 64)
				d.st.Generation, d.ok = n, err == nil
			case "counts":
				d.ok = v.IsObject() && decodeCounts(v, &d.st.Counts)
			case "expiry":
				d.ok = v.Type == gjson.String && d.st.Expiry.UnmarshalJSON([]byte(v.Raw)) == nil
			default: // age, buckets and start are not read
				d.ok = !foldsTo(k.Str, "state", "generation", "counts", "expiry")
				return d.ok
			}
			seen++
			return d.ok
		})
	}
	if !d.ok || seen != 4 {
		var st gobreaker.SharedState
		d.ok = json.Unmarshal(data, &st) == nil
		d.st = st
	}
	return d
}

// digits is v's text if v is a number written in digits alone (as
// encoding/json writes an unsigned integer), else "" (which no parse
// takes).
func digits(v gjson.Result) string {
	if v.Type != gjson.Number || strings.Trim(v.Raw, "0123456789") != "" {
		return ""
	}
	return v.Raw
}

// foldsTo reports whether k is one of names spelled otherwise: encoding/json
// matches a key to a field whatever its case.
func foldsTo(k string, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(k, n) {
			return true
		}
	}
	return false
}

// decodeCounts reads gobreaker's Counts, as encoding/json writes them.
func decodeCounts(v gjson.Result, c *gobreaker.Counts) bool {
	ok, seen := true, 0
	v.ForEach(func(k, n gjson.Result) bool {
		var f *uint32
		switch k.Str {
		case "Requests":
			f = &c.Requests
		case "TotalSuccesses":
			f = &c.TotalSuccesses
		case "TotalFailures":
			f = &c.TotalFailures
		case "TotalExclusions":
			f = &c.TotalExclusions
		case "ConsecutiveSuccesses":
			f = &c.ConsecutiveSuccesses
		case "ConsecutiveFailures":
			f = &c.ConsecutiveFailures
		default:
			ok = !foldsTo(k.Str, "Requests", "TotalSuccesses", "TotalFailures", "TotalExclusions", "ConsecutiveSuccesses", "ConsecutiveFailures")
			return ok
		}
		u, err := strconv.ParseUint(digits(n), 10, 32)
		*f, ok = uint32(u), err == nil
		seen++
		return ok
	})
	return ok && seen == 6
}

// newSharedStore returns a store over remote (nil for in-memory), which
// refreshes from it every refresh at most.
func newSharedStore(remote Remote, refresh time.Duration, now func() time.Time) *sharedStore {
	return &sharedStore{remote: remote, refresh: refresh, now: now,
		locks: map[string]*sync.Mutex{}, entries: map[string]*sharedEntry{}, flush: make(chan struct{}, 1)}
}

func (s *sharedStore) lockOf(name string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[name]
	if !ok {
		l = new(sync.Mutex)
		s.locks[name] = l
	}
	return l
}

// Lock implements gobreaker.SharedDataStore, in-process.
func (s *sharedStore) Lock(name string) error {
	s.lockOf(name).Lock()
	return nil
}

// Unlock implements gobreaker.SharedDataStore.
func (s *sharedStore) Unlock(name string) error {
	s.lockOf(name).Unlock()
	return nil
}

// GetData implements gobreaker.SharedDataStore: the cached state, taken
// from the remote when the cache is older than the refresh interval and
// the remote's generation is newer (or equal, when nothing is pending
// here).
func (s *sharedStore) GetData(name string) ([]byte, error) {
	data, err := s.current(name)
	if err != nil || data == nil {
		return data, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[name]
	s.foldLocked(e)
	return e.data, nil
}

// current is GetData without folding in the steady successes: the state
// as the sender reads it (state, steady), which writes nothing.
func (s *sharedStore) current(name string) ([]byte, error) {
	s.mu.Lock()
	e := s.entries[name]
	stale := e == nil || s.now().Sub(e.fetched) >= s.refresh
	s.mu.Unlock()
	if stale && s.remote != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		data, err := s.remote.Load(ctx, name)
		cancel()
		s.mu.Lock()
		if e = s.entries[name]; e == nil {
			e = new(sharedEntry)
			s.entries[name] = e
		}
		e.fetched = s.now()
		if err == nil && data != nil {
			if d := decode(data); e.data == nil || newerDecoded(d, e.decoded, !e.dirty) {
				e.data, e.decoded, e.dirty = data, d, false
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e = s.entries[name]; e == nil || e.data == nil {
		return nil, nil // gobreaker then writes its initial state
	}
	return e.data, nil
}

// newer reports whether state a is newer than b: of a later generation,
// or of the same with more requests counted (or as many, when orEqual).
// States are ordered so, because gobreaker reads the shared state before
// it takes the lock: a late write of what it read must not undo a
// transition, nor lose counts, that landed meanwhile.
func newer(a, b []byte, orEqual bool) bool {
	return newerDecoded(decode(a), decode(b), orEqual)
}

// newerDecoded is newer of states decoded: a state that does not decode
// is taken as newer, as what replaces it.
func newerDecoded(a, b decoded, orEqual bool) bool {
	if !a.ok || !b.ok {
		return true
	}
	x, y := &a.st, &b.st
	if x.Generation != y.Generation {
		return x.Generation > y.Generation
	}
	return x.Counts.Requests > y.Counts.Requests || (orEqual && x.Counts.Requests == y.Counts.Requests)
}

// SetData implements gobreaker.SharedDataStore: the state is kept here at
// once, unless an older one than what is kept, and merged into the remote
// in the background.
func (s *sharedStore) SetData(name string, data []byte) error {
	s.mu.Lock()
	e := s.entries[name]
	if e == nil {
		e = &sharedEntry{fetched: s.now()}
		s.entries[name] = e
	}
	if e.data != nil && bytes.Equal(data, e.data) {
		s.mu.Unlock()
		return nil
	}
	d := decode(data)
	if e.data != nil && !newerDecoded(d, e.decoded, true) {
		s.mu.Unlock()
		return nil
	}
	// A breaker's first state (closed, nothing counted) is what no stored
	// state means already: kept here, not written.
	e.data, e.decoded, e.dirty = data, d, s.remote != nil && !untouched(d)
	dirty := e.dirty
	s.mu.Unlock()
	if dirty {
		select {
		case s.flush <- struct{}{}:
		default:
		}
	}
	return nil
}

// untouched reports whether d is a breaker's first state: closed, of
// the first generation, nothing counted.
func untouched(d decoded) bool {
	return d.ok && d.st.State == gobreaker.StateClosed && d.st.Generation <= 1 && d.st.Counts == (gobreaker.Counts{})
}

// stateKey is the name gobreaker's DistributedCircuitBreaker keeps the
// state of the breaker called name under in its SharedDataStore.
func stateKey(name string) string { return "gobreaker:state:" + name }

// state reads the state kept under key (stateKey of a breaker's name) at
// now (gobreaker's clock, time.Now), decoded when it was stored, and
// writes nothing: an open breaker whose time is up reads half-open, as
// gobreaker would make it, and becomes so when its first trial is
// counted. Closed when there is no state, or it cannot be read.
func (s *sharedStore) state(key string, now time.Time) gobreaker.State {
	if data, err := s.current(key); err != nil || data == nil {
		return gobreaker.StateClosed
	}
	s.mu.Lock()
	var d decoded
	if e := s.entries[key]; e != nil {
		d = e.decoded
	}
	s.mu.Unlock()
	if !d.ok {
		return gobreaker.StateClosed
	}
	if d.st.State == gobreaker.StateOpen && d.st.Expiry.Before(now) {
		return gobreaker.StateHalfOpen
	}
	return d.st.State
}

// steady takes a success of the breaker whose state is kept under key
// (stateKey of its name) without gobreaker, when counting it would change
// nothing the breaker decides by: the state is closed, with no failure in
// its run (the sender's ReadyToTrip reads ConsecutiveFailures alone, and
// a closed breaker has no interval to roll). It reports whether it took
// it; if not, the caller counts it through Execute. This spares
// gobreaker's two JSON round trips on nearly every delivery. The success
// is not lost: it is counted into the state (fold) before gobreaker next
// reads the state, and before the state is merged, so that a healthy
// instance's requests still outnumber, in the merge, the state of one
// that fails alone. A failure counted concurrently is ordered after it,
// as it could have been. The state is as current last read it.
func (s *sharedStore) steady(key string) bool {
	s.mu.Lock()
	e := s.entries[key]
	if e == nil || e.data == nil || !e.decoded.ok || e.decoded.st.State != gobreaker.StateClosed ||
		e.decoded.st.Counts.ConsecutiveFailures != 0 {
		s.mu.Unlock()
		return false
	}
	if e.steadyGen != e.decoded.st.Generation {
		e.steady, e.steadyGen = 0, e.decoded.st.Generation
	}
	e.steady++
	first := e.steady == 1
	s.mu.Unlock()
	if first && s.remote != nil {
		select { // merged at the next round, as a counted attempt is
		case s.flush <- struct{}{}:
		default:
		}
	}
	return true
}

// foldLocked counts e's steady successes into its state, as gobreaker
// counts a success while closed: requests and total successes, and the
// run of successes unless a failure has been counted since (then the
// successes come before it). Successes of an earlier generation are
// dropped, as gobreaker drops them. Once per merge round at most under
// load, so the JSON here is not per delivery. Call with s.mu held.
func (s *sharedStore) foldLocked(e *sharedEntry) {
	if e == nil || e.steady == 0 {
		return
	}
	n := e.steady
	e.steady = 0
	var st gobreaker.SharedState
	if e.data == nil || json.Unmarshal(e.data, &st) != nil || st.Generation != e.steadyGen || st.State != gobreaker.StateClosed {
		return
	}
	st.Counts.Requests += n
	st.Counts.TotalSuccesses += n
	if st.Counts.ConsecutiveFailures == 0 {
		st.Counts.ConsecutiveSuccesses += n
	}
	data, err := json.Marshal(st)
	if err != nil {
		return
	}
	e.data, e.decoded, e.dirty = data, decode(data), s.remote != nil
}

// run merges written states into the remote until ctx ends, at most one
// round per interval.
func (s *sharedStore) run(ctx context.Context, interval time.Duration) {
	if s.remote == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			s.push() // what this instance last knew
			return
		case <-s.flush:
		}
		s.push()
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			s.push()
			return
		case <-t.C:
		}
	}
}

// push merges every dirty state into the remote.
func (s *sharedStore) push() {
	s.mu.Lock()
	pending := map[string][]byte{}
	for name, e := range s.entries {
		s.foldLocked(e)
		if e.dirty {
			pending[name] = e.data
			e.dirty = false
		}
	}
	s.mu.Unlock()
	for name, data := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := s.remote.Merge(ctx, name, data); err != nil {
			s.mu.Lock()
			if e := s.entries[name]; e != nil && string(e.data) == string(data) {
				e.dirty = true // try again with the next write
			}
			s.mu.Unlock()
		}
		cancel()
	}
}

var _ gobreaker.SharedDataStore = (*sharedStore)(nil)
