package redisstore_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/internal/replicas"
)

// The tests' clock and claim.
var (
	t0     = time.UnixMilli(1_800_000_000_000)
	fp     = dedupe.Fingerprint{1}
	record = dedupe.Record{Status: 200, Body: []byte("ok")}
)

func claimOf(token string, now time.Time) dedupe.Claim {
	return dedupe.Claim{Fingerprint: fp, Token: token, Lease: time.Minute, Retention: time.Hour, Now: now}
}

func acquireOf(token string) freshness.Acquire {
	return freshness.Acquire{Mark: 1, Token: token, Lease: time.Minute, Now: t0}
}

// stores are two Stores on one prefix: waiting waits for n replicas within
// timeout (w), plain waits for none.
type stores struct {
	waiting, plain *redisstore.Store
	w              *replicas.Waiter
	prefix         string
}

func newStores(rdb redis.UniversalClient, n int, timeout time.Duration) stores {
	p := redistest.Prefix("repl")
	w := replicas.New(rdb, n, timeout, slog.New(slog.DiscardHandler))
	s := stores{waiting: redisstore.New(rdb, p), plain: redisstore.New(rdb, p), w: w, prefix: p}
	s.waiting.WaitForReplicas(w)
	return s
}

// shortClients are a lone master and a Cluster of masters without
// replicas: every write falls short of one replica. The single node's
// Store batches (one WAIT per pipeline); the Cluster's does not (a WAIT
// per write, on the slot's master).
func shortClients(t *testing.T) map[string]redis.UniversalClient {
	t.Helper()
	srv := redistest.Start(t)
	single := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	cluster := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: redistest.StartCluster(t), IsClusterMode: true})
	t.Cleanup(func() { _ = single.Close(); _ = cluster.Close() })
	return map[string]redis.UniversalClient{"single": single, "cluster": cluster}
}

// TestShortClaimIsRefusedAndReleased: a claim no replica acknowledged is
// refused with ErrShortfall, and released, so that the provider's retry
// is claimed at once instead of answered in flight until the lease ends.
// A record of a claim is not refused, only counted.
func TestShortClaimIsRefusedAndReleased(t *testing.T) {
	for name, rdb := range shortClients(t) {
		t.Run(name, func(t *testing.T) {
			s := newStores(rdb, 1, 50*time.Millisecond)
			ctx := t.Context()

			// A new key: SET NX.
			if _, err := s.waiting.Claim(ctx, "new", claimOf("a", t0)); !errors.Is(err, replicas.ErrShortfall) {
				t.Fatalf("Claim = %v, want ErrShortfall", err)
			}
			if e, err := s.plain.Get(ctx, "new", t0); err != nil || e.State != dedupe.Absent {
				t.Errorf("after the refused claim Get = %+v, %v; want Absent", e, err)
			}
			if res, err := s.plain.Claim(ctx, "new", claimOf("b", t0)); err != nil || res.Status != dedupe.Claimed {
				t.Errorf("the retry's Claim = %+v, %v; want Claimed", res, err)
			}

			// An expired lease in the way: the take-over writes, falls
			// short, is refused, and released: the retry claims afresh.
			if _, err := s.plain.Claim(ctx, "old", claimOf("a", t0)); err != nil {
				t.Fatal(err)
			}
			later := t0.Add(2 * time.Minute)
			if _, err := s.waiting.Claim(ctx, "old", claimOf("b", later)); !errors.Is(err, replicas.ErrShortfall) {
				t.Fatalf("Claim over an expired lease = %v, want ErrShortfall", err)
			}
			if res, err := s.plain.Claim(ctx, "old", claimOf("b", later)); err != nil || res.Status != dedupe.Claimed {
				t.Errorf("the retry's Claim = %+v, %v; want Claimed (the refused take-over released)", res, err)
			}

			// Another token's live claim is in the way: the claim
			// wrote nothing, so its answer (in flight) stands whatever
			// the replicas, and it frees nothing.
			if _, err := s.plain.Claim(ctx, "live", claimOf("a", t0)); err != nil {
				t.Fatal(err)
			}
			if res, err := s.waiting.Claim(ctx, "live", claimOf("b", t0)); err != nil || res.Status != dedupe.InFlight {
				t.Fatalf("Claim of a live claim = %+v, %v; want InFlight", res, err)
			}
			if tok, err := redisstore.Token(ctx, rdb, s.prefix, "live"); err != nil || tok != "a" {
				t.Errorf("the live claim's token = %q, %v after another's refused claim; want a", tok, err)
			}

			// A record counts, and is written, a flushed script
			// (NOSCRIPT, then run on its own) too.
			if _, err := s.plain.Claim(ctx, "rec", claimOf("a", t0)); err != nil {
				t.Fatal(err)
			}
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.waiting.Record(ctx, "rec", "a", record, time.Hour, t0); err != nil {
				t.Errorf("Record = %v, want nil: its answer was given", err)
			}
			if e, err := s.plain.Get(ctx, "rec", t0); err != nil || e.State != dedupe.StateRecorded {
				t.Errorf("after Record Get = %+v, %v; want recorded", e, err)
			}
			// A duplicate's claim finds the record and writes nothing:
			// the replay stands whatever the replicas.
			if res, err := s.waiting.Claim(ctx, "rec", claimOf("z", t0)); err != nil || res.Status != dedupe.Recorded {
				t.Errorf("a duplicate's Claim = %+v, %v; want Recorded", res, err)
			}

			// Each refused claim released (a release is a write too).
			want := counts(map[string]int64{"claim": 2, "release": 2, "record": 1})
			if diff := cmp.Diff(want, s.w.Counts()); diff != "" {
				t.Errorf("Counts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestShortAcquireReleasesTheEntity: an entity's acquire no replica
// acknowledged is refused, and its lease freed: the next event of the
// entity acquires it instead of finding it busy.
func TestShortAcquireReleasesTheEntity(t *testing.T) {
	for name, rdb := range shortClients(t) {
		t.Run(name, func(t *testing.T) {
			s := newStores(rdb, 1, 50*time.Millisecond)
			ctx := t.Context()
			if _, err := s.waiting.AcquireEntity(ctx, "e", acquireOf("a")); !errors.Is(err, replicas.ErrShortfall) {
				t.Fatalf("AcquireEntity = %v, want ErrShortfall", err)
			}
			if res, err := s.plain.AcquireEntity(ctx, "e", acquireOf("b")); err != nil || res.Status != freshness.Acquired {
				t.Errorf("the next AcquireEntity = %+v, %v; want Acquired", res, err)
			}
			// The watermark counts, and moves.
			f := freshness.Finish{Advance: true, Mark: 5, Retention: time.Hour, Now: t0}
			if err := s.waiting.FinishEntity(ctx, "e", "b", f); err != nil {
				t.Errorf("FinishEntity = %v, want nil", err)
			}
			if st, err := s.plain.GetEntity(ctx, "e", t0); err != nil || st.Watermark != 5 {
				t.Errorf("GetEntity = %+v, %v; want watermark 5", st, err)
			}
			// The refused acquire's release, then the finish.
			want := counts(map[string]int64{"claim": 1, "watermark": 2})
			if diff := cmp.Diff(want, s.w.Counts()); diff != "" {
				t.Errorf("Counts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWithReplicaNothingFallsShort: on a master with a replica every
// write is acknowledged, batched or not, a flushed script included.
func TestWithReplicaNothingFallsShort(t *testing.T) {
	m, _ := redistest.StartReplicated(t)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{m.Addr()}})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStores(rdb, 1, 5*time.Second)
	ctx := t.Context()

	if res, err := s.waiting.Claim(ctx, "k", claimOf("a", t0)); err != nil || res.Status != dedupe.Claimed {
		t.Fatalf("Claim = %+v, %v; want Claimed", res, err)
	}
	// NOSCRIPT in the shared pipeline: the script is run on its own.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.waiting.Record(ctx, "k", "a", record, time.Hour, t0); err != nil {
		t.Fatalf("Record = %v", err)
	}
	if _, err := s.waiting.Claim(ctx, "k2", claimOf("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.waiting.Release(ctx, "k2", "a"); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if res, err := s.waiting.AcquireEntity(ctx, "e", acquireOf("a")); err != nil || res.Status != freshness.Acquired {
		t.Fatalf("AcquireEntity = %+v, %v; want Acquired", res, err)
	}
	if err := s.waiting.FinishEntity(ctx, "e", "a", freshness.Finish{Advance: true, Mark: 1, Retention: time.Hour, Now: t0}); err != nil {
		t.Fatalf("FinishEntity = %v", err)
	}
	if diff := cmp.Diff(counts(nil), s.w.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	if e, err := s.plain.Get(ctx, "k", t0); err != nil || e.State != dedupe.StateRecorded {
		t.Errorf("Get = %+v, %v; want recorded", e, err)
	}
}

// counts is Counts with every op, those of some as given.
func counts(some map[string]int64) map[string]int64 {
	m := map[string]int64{}
	for _, op := range replicas.Ops {
		m[op.Name] = some[op.Name]
	}
	return m
}
