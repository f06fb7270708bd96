//go:build linux

package redisstore

import (
	"bufio"
	"context"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// claimRecorder is the part of a store a unique delivery goes through.
type claimRecorder interface {
	Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error)
	Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error
}

// benchRecord is a typical small recorded answer.
func benchRecord() dedupe.Record {
	return dedupe.Record{
		Status: 200,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"2f1c0a7e9b"}},
		Body:   []byte(`{"received":true,"id":"evt_0123456789"}`),
	}
}

// uniquePair is what a unique delivery costs the store: a claim, then the
// record under its token.
func uniquePair(ctx context.Context, s claimRecorder, key, token string, fp dedupe.Fingerprint, rec dedupe.Record, now time.Time) error {
	res, err := s.Claim(ctx, key, dedupe.Claim{Fingerprint: fp, Token: token, Lease: 30 * time.Second, Retention: 24 * time.Hour, Now: now})
	if err != nil {
		return err
	}
	if res.Status != dedupe.Claimed {
		return errUnexpected(res.Status)
	}
	return s.Record(ctx, key, token, rec, 24*time.Hour, now)
}

type errUnexpected dedupe.ClaimStatus

func (e errUnexpected) Error() string { return "claim answered " + dedupe.ClaimStatus(e).String() }

// claimRecordBudget bounds the allocations of one claim and record on the
// batched store, Go side (the caller, the batcher and go-redis), one pair
// at a time: 91 measured, 14 of them go-redis classifying the nil answer
// of SET NX GET as a pipeline's first error (a pipeline of one here;
// under load once per pipeline, so 40 a pair at 32 goroutines).
const claimRecordBudget = 95.0

// BenchmarkClaimRecord runs claim+record pairs of unique keys against a
// real redis-server, from 32 goroutines sharing the batcher as the
// gateway's requests do; see compare for what it reports. It fails when a pair on the Store allocates over
// claimRecordBudget.
func BenchmarkClaimRecord(b *testing.B) {
	rec := benchRecord()
	fp := dedupe.FingerprintOf(rec.Body)
	now := time.Now()
	compare(b, nil, func(ctx context.Context, s claimRecorder, n string) error {
		return uniquePair(ctx, s, "evt_"+n, "tok"+n, fp, rec, now)
	}, claimRecordBudget)
}

// claimRecordedBudget bounds the allocations of a claim that finds a
// record (a duplicate the replay cache does not hold), one at a time.
const claimRecordedBudget = 52

// BenchmarkClaimRecorded claims keys already recorded: the replay of a
// duplicate that the instance's replay cache does not hold. As
// BenchmarkClaimRecord, with the budget claimRecordedBudget.
func BenchmarkClaimRecorded(b *testing.B) {
	rec := benchRecord()
	fp := dedupe.FingerprintOf(rec.Body)
	now := time.Now()
	const keys = 1024
	setup := func(ctx context.Context, s claimRecorder) error {
		for i := range keys {
			n := strconv.Itoa(i)
			if err := uniquePair(ctx, s, "dup_"+n, "tok"+n, fp, rec, now); err != nil {
				return err
			}
		}
		return nil
	}
	compare(b, setup, func(ctx context.Context, s claimRecorder, n string) error {
		i, _ := strconv.Atoi(n)
		res, err := s.Claim(ctx, "dup_"+strconv.Itoa(i%keys), dedupe.Claim{Fingerprint: fp, Token: "t" + n, Lease: 30 * time.Second, Retention: 24 * time.Hour, Now: now})
		if err == nil && res.Status != dedupe.Recorded {
			err = errUnexpected(res.Status)
		}
		return err
	}, claimRecordedBudget)
}

// compare runs op against the Store on a real redis-server, from 32
// goroutines sharing the batcher as the gateway's requests do, in chunks.
// Per op it reports the Go process's CPU (go_µs, all its threads: the
// callers, the batcher, go-redis), redis-server's CPU (rds_µs, from INFO
// cpu), the time Redis counts in scripts (lua_µs, EVALSHA and EVAL in
// INFO commandstats), and the allocations under that load
// (allocs/op@32) and one at a time (allocs/op). It fails when op
// allocates over budget, one at a time.
func compare(b *testing.B, setup func(context.Context, claimRecorder) error, op func(context.Context, claimRecorder, string) error, budget float64) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	stores := []struct {
		name string
		s    claimRecorder
	}{
		{"new", New(rdb, "new")},
	}
	ctx := context.Background()
	var seq atomic.Int64
	const (
		chunk = 1024
		conc  = 32
	)
	run := func(s claimRecorder) {
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for range chunk / conc {
					if err := op(ctx, s, strconv.FormatInt(seq.Add(1), 10)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	type totals struct {
		goCPU, redisCPU time.Duration
		mallocs         uint64
		cmds            map[string]cmdStat
	}
	sum := make([]totals, len(stores))
	for i, st := range stores {
		sum[i].cmds = map[string]cmdStat{}
		if setup != nil {
			if err := setup(ctx, st.s); err != nil {
				b.Fatal(err)
			}
		}
		run(st.s) // load the scripts, warm the pool
	}
	chunks := 0
	for b.Loop() {
		for i, st := range stores {
			r0 := redisInfo(b, rdb)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			p0 := processCPU(b)
			run(st.s)
			p1 := processCPU(b)
			runtime.ReadMemStats(&m1)
			r1 := redisInfo(b, rdb)
			sum[i].mallocs += m1.Mallocs - m0.Mallocs
			sum[i].goCPU += p1 - p0
			sum[i].redisCPU += r1.cpu - r0.cpu
			for name, c := range r1.cmds {
				if name == "info" {
					continue
				}
				d := sum[i].cmds[name]
				d.calls += c.calls - r0.cmds[name].calls
				d.usec += c.usec - r0.cmds[name].usec
				sum[i].cmds[name] = d
			}
		}
		chunks++
	}
	ops := float64(chunks * chunk)
	perOp := func(d time.Duration) float64 { return float64(d.Microseconds()) / ops }
	for i, st := range stores {
		var names []string
		for name, c := range sum[i].cmds {
			if c.calls > 0 {
				names = append(names, name)
			}
		}
		lua := float64(sum[i].cmds["evalsha"].usec+sum[i].cmds["eval"].usec) / ops
		sort.Strings(names)
		var line strings.Builder
		for _, name := range names {
			c := sum[i].cmds[name]
			line.WriteString(" " + name + " " + strconv.FormatFloat(float64(c.calls)/ops, 'f', 2, 64) + "/op " +
				strconv.FormatFloat(float64(c.usec)/float64(c.calls), 'f', 2, 64) + "µs/call")
		}
		b.Logf("%s: go %.1f µs/op, redis-server %.1f µs/op, in scripts %.1f µs/op; per command (those a script calls counted too):%s",
			st.name, perOp(sum[i].goCPU), perOp(sum[i].redisCPU), lua, line.String())
		b.ReportMetric(perOp(sum[i].goCPU), st.name+"_go_µs/op")
		b.ReportMetric(perOp(sum[i].redisCPU), st.name+"_rds_µs/op")
		b.ReportMetric(lua, st.name+"_lua_µs/op")
		b.ReportMetric(float64(sum[i].mallocs)/ops, st.name+"_allocs/op@32")
	}

	for _, st := range stores {
		allocs := testing.AllocsPerRun(500, func() {
			if err := op(ctx, st.s, strconv.FormatInt(seq.Add(1), 10)); err != nil {
				b.Fatal(err)
			}
		})
		b.ReportMetric(allocs, st.name+"_allocs/op")
		if allocs > budget {
			b.Fatalf("%s allocates %.0f times an op, over the budget of %.0f", b.Name(), allocs, budget)
		}
	}
}

type cmdStat struct{ calls, usec int64 }

type info struct {
	cpu  time.Duration
	cmds map[string]cmdStat
}

// redisInfo reads redis-server's CPU time and its per-command counts.
func redisInfo(b *testing.B, rdb *redis.Client) info {
	s, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	in := info{cmds: map[string]cmdStat{}}
	if in.cpu, err = redistest.CPU(s); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		var c cmdStat
		for f := range strings.SplitSeq(v, ",") {
			fk, fv, _ := strings.Cut(f, "=")
			switch fk {
			case "calls":
				c.calls, _ = strconv.ParseInt(fv, 10, 64)
			case "usec":
				c.usec, _ = strconv.ParseInt(fv, 10, 64)
			}
		}
		in.cmds[strings.TrimPrefix(k, "cmdstat_")] = c
	}
	return in
}

// processCPU is the CPU time of the whole process, every thread: the
// store's work is spread over the callers, the batcher's goroutine and
// go-redis, none of them tied to one thread.
func processCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
