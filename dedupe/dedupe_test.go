package dedupe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/internal/bolttest"
)

// newStore returns a real embedded store on a temp file.
func newStore(t *testing.T) dedupe.Store { return newStoreWith(t, nil) }

func newStoreWith(t *testing.T, opts *bolt.Options) dedupe.Store {
	t.Helper()
	db := bolttest.Open(t, opts)
	s, err := boltstore.New(db, boltstore.Options{PurgeEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mustBegin and mustFinish are BeginBody and Finish where a test only sets
// the stage: an error fails it.
func mustBegin(t *testing.T, d *dedupe.Deduper, key string) {
	t.Helper()
	if _, err := d.BeginBody(t.Context(), key, payload, nil); err != nil {
		t.Fatalf("BeginBody(%q): %v", key, err)
	}
}

func mustFinish(t *testing.T, d *dedupe.Deduper, key string, dec dedupe.Decision, resp dedupe.Response) {
	t.Helper()
	if _, err := d.Finish(t.Context(), key, dec, resp); err != nil {
		t.Fatalf("Finish(%q): %v", key, err)
	}
}

func newDeduper(t *testing.T, store dedupe.Store, cfg dedupe.Config) *dedupe.Deduper {
	t.Helper()
	d, err := dedupe.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// payload is the body of the tests' copies.
var payload = []byte(`{"type":"reservation.confirmed"}`)

func TestWaiterGetsTheRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeduper(t, newStore(t), dedupe.Config{Lease: 10 * time.Second, Wait: 5 * time.Second})
		first, err := d.BeginBody(t.Context(), "k", payload, nil)
		if err != nil || first.Action != dedupe.Forward || first.Result != "forwarded" {
			t.Fatalf("first = %+v, %v; want forwarded", first, err)
		}
		got := make(chan dedupe.Decision)
		go func() {
			dec, err := d.BeginBody(t.Context(), "k", payload, nil)
			if err != nil {
				t.Error(err)
			}
			got <- dec
		}()
		time.Sleep(2 * time.Second) // the upstream takes its time
		if _, err := d.Finish(t.Context(), "k", first, dedupe.Response{Status: 201, Header: http.Header{"X-A": {"1"}}, Body: []byte("ok")}); err != nil {
			t.Fatal(err)
		}
		dec := <-got
		if dec.Action != dedupe.Replay || dec.Record.Status != 201 || string(dec.Record.Body) != "ok" {
			t.Fatalf("waiter = %+v, want the 201 replayed", dec)
		}
	})
}

func TestWaiterGivesUpWithTheLeaseRemaining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeduper(t, newStore(t), dedupe.Config{Lease: 10 * time.Second, Wait: 3 * time.Second})
		first, err := d.BeginBody(t.Context(), "k", payload, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		dec, err := d.BeginBody(t.Context(), "k", payload, nil)
		if err != nil {
			t.Fatal(err)
		}
		if dec.Action != dedupe.Reject || !errors.Is(dec.Err, dedupe.ErrInFlight) {
			t.Fatalf("waiter = %+v, want ErrInFlight", dec)
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Errorf("waited %s, want the configured 3s", waited)
		}
		if want := time.Until(first.LeaseUntil); dec.RetryAfter(time.Now()) != want || want < 6*time.Second {
			t.Errorf("RetryAfter = %s, want the lease's remaining %s", dec.RetryAfter(time.Now()), want)
		}
	})
}

func TestWaiterForwardsWhenTheFirstIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeduper(t, newStore(t), dedupe.Config{Lease: 10 * time.Second, Wait: 5 * time.Second})
		first, _ := d.BeginBody(t.Context(), "k", payload, nil)
		got := make(chan dedupe.Decision)
		go func() {
			dec, _ := d.BeginBody(t.Context(), "k", payload, nil)
			got <- dec
		}()
		time.Sleep(time.Second)
		recorded, err := d.Finish(t.Context(), "k", first, dedupe.Response{Status: 503})
		if err != nil || recorded {
			t.Fatalf("Finish(503) = %v, %v; want released", recorded, err)
		}
		if dec := <-got; dec.Action != dedupe.Forward {
			t.Fatalf("waiter = %+v, want to forward after the release", dec)
		}
	})
}

func TestRejectAtOnceWithoutWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeduper(t, newStore(t), dedupe.Config{})
		mustBegin(t, d, "k")
		start := time.Now()
		dec, _ := d.BeginBody(t.Context(), "k", payload, nil)
		if dec.Result != "in_flight" || time.Since(start) != 0 {
			t.Fatalf("got %+v after %s, want in_flight at once", dec, time.Since(start))
		}
		other := []byte("other")
		if dec, _ := d.BeginBody(t.Context(), "k", other, nil); dec.Result != "mismatch" || !errors.Is(dec.Err, dedupe.ErrKeyReused) {
			t.Fatalf("other body: %+v, want mismatch", dec)
		}
	})
}

func TestLeaseExpiredForwardsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeduper(t, newStore(t), dedupe.Config{Lease: 5 * time.Second})
		first, _ := d.BeginBody(t.Context(), "k", payload, nil)
		time.Sleep(5 * time.Second)
		second, _ := d.BeginBody(t.Context(), "k", payload, nil)
		if second.Result != "lease_expired" || second.Action != dedupe.Forward {
			t.Fatalf("after the lease: %+v, want lease_expired forward", second)
		}
		if _, err := d.Finish(t.Context(), "k", first, dedupe.Response{Status: 200}); !errors.Is(err, dedupe.ErrClaimLost) {
			t.Errorf("late Finish by the first: %v, want ErrClaimLost", err)
		}
	})
}

func TestFinalClassesAndMaxRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeduper(t, newStore(t), dedupe.Config{
			Final:     func(s int) bool { return s/100 == 2 || s/100 == 4 },
			MaxRecord: 4,
		})
		dec, _ := d.BeginBody(t.Context(), "k", payload, nil)
		if ok, err := d.Finish(t.Context(), "k", dec, dedupe.Response{Status: 422, Body: []byte("too long")}); !ok || err != nil {
			t.Fatalf("Finish(422) = %v, %v; want recorded", ok, err)
		}
		rep, _ := d.BeginBody(t.Context(), "k", payload, nil)
		if rep.Record.Status != 422 || !rep.Record.BodyOmitted || rep.Record.Body != nil {
			t.Errorf("replay = %+v, want 422 with the body omitted", rep.Record)
		}
	})
}

func TestNewRecordKeepsEndToEndHeaders(t *testing.T) {
	h := http.Header{
		"Content-Type": {"application/json"}, "Date": {"x"}, "Connection": {"close"},
		"Transfer-Encoding": {"chunked"}, "Content-Length": {"9"}, "X-Request-Id": {"a", "b"},
		"Set-Cookie": {"session=first-client"},
	}
	rec := dedupe.NewRecord(200, h, []byte("body"), 100)
	want := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"a", "b"}}
	if diff := cmp.Diff(want, rec.Header); diff != "" {
		t.Errorf("recorded headers (-want +got):\n%s", diff)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []dedupe.Config{
		{Lease: 100 * time.Millisecond},
		{Lease: time.Hour, Retention: time.Minute},
		{Wait: -time.Second},
	} {
		if _, err := dedupe.New(nil, cfg); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", cfg)
		}
	}
}

// flakyStore fails the first n Record calls after applying nothing, as a
// store whose reply was lost or that timed out would.
type flakyStore struct {
	dedupe.Store
	n int
}

func (s *flakyStore) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	if s.n > 0 {
		s.n--
		return errors.New("i/o timeout")
	}
	return s.Store.Record(ctx, key, token, rec, retention, now)
}

func TestFinishRetriesAStoreFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakyStore{Store: newStore(t), n: 2}
		d := newDeduper(t, store, dedupe.Config{})
		dec, _ := d.BeginBody(t.Context(), "k", payload, nil)
		ok, err := d.Finish(t.Context(), "k", dec, dedupe.Response{Status: 200})
		if !ok || err != nil {
			t.Fatalf("Finish after two failures = %v, %v; want recorded", ok, err)
		}
		store.n = 10
		dec, _ = d.BeginBody(t.Context(), "k2", payload, nil)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if ok, err := d.Finish(ctx, "k2", dec, dedupe.Response{Status: 200}); ok || err == nil {
			t.Fatalf("Finish with the store down = %v, %v; want the error", ok, err)
		}
	})
}

// countingStore counts Claim calls.
type countingStore struct {
	dedupe.Store
	claims int
}

func (s *countingStore) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	s.claims++
	return s.Store.Claim(ctx, key, c)
}

// TestReplayCache: a record once seen is replayed from memory until it
// expires, mismatches included; afterwards the store decides again.
func TestReplayCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Store: newStore(t)}
		d := newDeduper(t, store, dedupe.Config{Retention: time.Hour})
		dec, _ := d.BeginBody(t.Context(), "k", payload, nil)
		mustFinish(t, d, "k", dec, dedupe.Response{Status: 201, Body: []byte("ok")})
		claims := store.claims
		for range 3 {
			rep, _ := d.BeginBody(t.Context(), "k", payload, nil)
			if rep.Action != dedupe.Replay || rep.Record.Status != 201 {
				t.Fatalf("replay = %+v", rep)
			}
		}
		if other, _ := d.BeginBody(t.Context(), "k", []byte("x"), nil); other.Result != "mismatch" {
			t.Errorf("other body: %+v, want mismatch", other)
		}
		if store.claims != claims {
			t.Errorf("%d store claims for cached replays, want 0", store.claims-claims)
		}
		time.Sleep(time.Hour)
		if dec, _ := d.BeginBody(t.Context(), "k", payload, nil); dec.Action != dedupe.Forward || store.claims != claims+1 {
			t.Errorf("after retention: %+v (claims +%d), want a fresh forward from the store", dec, store.claims-claims)
		}

		// Another instance's record is cached when first replayed.
		other := newDeduper(t, store, dedupe.Config{Retention: time.Hour})
		dec, _ = d.BeginBody(t.Context(), "j", payload, nil)
		mustFinish(t, d, "j", dec, dedupe.Response{Status: 200})
		claims = store.claims
		mustBegin(t, other, "j")
		mustBegin(t, other, "j")
		if store.claims != claims+1 {
			t.Errorf("second instance: %d claims for two replays, want 1", store.claims-claims)
		}
	})
}

// downStore fails every write until up, applying nothing, as a Redis that
// refuses writes would.
type downStore struct {
	dedupe.Store
	up time.Time
}

func (s *downStore) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	if time.Now().Before(s.up) {
		return errors.New("READONLY You can't write against a read only replica")
	}
	return s.Store.Record(ctx, key, token, rec, retention, now)
}

// TestFinishRetriesUntilTheLease: a store that refuses writes for 1.5s
// still gets the record, well within the lease; given up, the retry of
// the delivery would be forwarded again after the lease.
func TestFinishRetriesUntilTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &downStore{Store: newStore(t), up: time.Now().Add(1500 * time.Millisecond)}
		d := newDeduper(t, store, dedupe.Config{Lease: 10 * time.Second})
		dec, _ := d.BeginBody(t.Context(), "k", payload, nil)
		ctx, cancel := context.WithDeadline(t.Context(), dec.LeaseUntil)
		defer cancel()
		if ok, err := d.Finish(ctx, "k", dec, dedupe.Response{Status: 200}); !ok || err != nil {
			t.Fatalf("Finish with writes refused for 1.5s = %v, %v; want recorded", ok, err)
		}
		if rep, _ := d.BeginBody(t.Context(), "k", payload, nil); rep.Action != dedupe.Replay {
			t.Errorf("after the record: %+v, want a replay", rep)
		}
	})
}

// lostReplyStore applies a claim, then reports a failure, as a store whose
// reply was lost (Redis asleep past the client's timeout) would.
type lostReplyStore struct {
	dedupe.Store
	lose bool
}

func (s *lostReplyStore) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, key, c)
	if s.lose {
		s.lose = false
		return dedupe.ClaimResult{}, errors.New("i/o timeout")
	}
	return res, err
}

// TestLostClaimIsReleased: a claim that landed although BeginBody failed is
// let go, so the retry is forwarded, as the first forward it is, and not
// held back with in_flight until the lease ends.
func TestLostClaimIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &lostReplyStore{Store: newStore(t), lose: true}
		d := newDeduper(t, store, dedupe.Config{Lease: 30 * time.Second})
		if _, err := d.BeginBody(t.Context(), "k", payload, nil); err == nil {
			t.Fatal("BeginBody with a lost reply succeeded")
		}
		time.Sleep(time.Second)
		dec, err := d.BeginBody(t.Context(), "k", payload, nil)
		if err != nil || dec.Action != dedupe.Forward || dec.Result != "forwarded" {
			t.Fatalf("retry a second later = %+v, %v; want forwarded", dec, err)
		}
		synctest.Wait()
	})
}

// TestReplayCacheBounds: the cache holds at most ReplayCacheBytes, however
// large its keys, and replays a record from memory for at most
// ReplayCacheTTL, so a record forgotten in the store is not replayed for
// days.
func TestReplayCacheBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No fsync: this test writes 10,000 records to fill the cache.
		store := &countingStore{Store: newStoreWith(t, &bolt.Options{NoSync: true})}
		d := newDeduper(t, store, dedupe.Config{Retention: 24 * time.Hour})
		body := bytes.Repeat([]byte("x"), 4<<10)
		for i := range 10000 {
			key := fmt.Sprintf("%01024d", i)
			dec, err := d.BeginBody(t.Context(), key, payload, nil)
			if err != nil {
				t.Fatal(err)
			}
			mustFinish(t, d, key, dec, dedupe.Response{Status: 200, Body: body})
		}
		if got := d.CacheBytes(); got > dedupe.ReplayCacheBytes || got < dedupe.ReplayCacheBytes/2 {
			t.Errorf("cache holds %d bytes, want at most %d and near it", got, dedupe.ReplayCacheBytes)
		}

		dec, _ := d.BeginBody(t.Context(), "k", payload, nil)
		mustFinish(t, d, "k", dec, dedupe.Response{Status: 200})
		claims := store.claims
		mustBegin(t, d, "k")
		if store.claims != claims {
			t.Fatalf("a fresh record was not replayed from memory")
		}
		time.Sleep(dedupe.ReplayCacheTTL)
		if rep, _ := d.BeginBody(t.Context(), "k", payload, nil); rep.Action != dedupe.Replay || store.claims != claims+1 {
			t.Errorf("after ReplayCacheTTL: %+v, %d claims; want a replay read from the store", rep, store.claims-claims)
		}
	})
}

// TestForgetReachesEveryInstance: two instances share a store. One forgets
// a record; the other, which replays it from its cache, lets it go within
// ReplayCacheTTL, and the next copy is then forwarded once, by one of them.
func TestForgetReachesEveryInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newStore(t)
		a := newDeduper(t, store, dedupe.Config{Retention: 24 * time.Hour})
		b := newDeduper(t, store, dedupe.Config{Retention: 24 * time.Hour})
		dec, err := a.BeginBody(t.Context(), "k", payload, nil)
		if err != nil || dec.Action != dedupe.Forward {
			t.Fatalf("first copy: %+v, %v", dec, err)
		}
		mustFinish(t, a, "k", dec, dedupe.Response{Status: 200, Body: []byte("applied")})
		if dec, _ := b.BeginBody(t.Context(), "k", payload, nil); dec.Action != dedupe.Replay {
			t.Fatalf("b, before the forget: %+v, want a replay (now in b's cache)", dec)
		}

		if found, err := a.Forget(t.Context(), "k"); !found || err != nil {
			t.Fatalf("Forget = %v, %v", found, err)
		}
		// Within the bound b may still replay from memory; the store is
		// not asked.
		time.Sleep(dedupe.ReplayCacheTTL - time.Second)
		if dec, _ := b.BeginBody(t.Context(), "k", payload, nil); dec.Action != dedupe.Replay {
			t.Fatalf("b, within ReplayCacheTTL: %+v, want its cached replay", dec)
		}
		time.Sleep(time.Second)
		// Past it, b has let it go: b forwards it, and nobody again.
		dec, err = b.BeginBody(t.Context(), "k", payload, nil)
		if err != nil || dec.Action != dedupe.Forward {
			t.Fatalf("b, past ReplayCacheTTL: %+v, %v; want a forward", dec, err)
		}
		mustFinish(t, b, "k", dec, dedupe.Response{Status: 200})
		for _, d := range []*dedupe.Deduper{a, b} {
			if dec, _ := d.BeginBody(t.Context(), "k", payload, nil); dec.Action != dedupe.Replay {
				t.Errorf("after the new forward: %+v, want a replay", dec)
			}
		}
	})
}

// TestFinalClasses: the recorded classes are final, but for the statuses
// that ask for a retry; a 5xx class, or one that is no class, is refused.
func TestFinalClasses(t *testing.T) {
	final, err := dedupe.FinalClasses([]string{"2xx", "4xx"})
	if err != nil {
		t.Fatal(err)
	}
	for status, want := range map[int]bool{
		200: true, 204: true, 302: false, 400: true, 422: true,
		408: false, 425: false, 429: false, 500: false, 503: false, 0: false, 600: false,
	} {
		if got := final(status); got != want {
			t.Errorf("final(%d) = %v, want %v", status, got, want)
		}
	}
	for class, want := range map[string]string{
		"5xx": "record 5xx: a server error is never final, the sender must retry it",
		"2XX": `record "2XX": want status classes 2xx, 3xx or 4xx`,
		"1xx": `record "1xx": want status classes 2xx, 3xx or 4xx`,
	} {
		if _, err := dedupe.FinalClasses([]string{"2xx", class}); err == nil || err.Error() != want {
			t.Errorf("dedupe.FinalClasses(%s): %v, want %s", class, err, want)
		}
	}
}
