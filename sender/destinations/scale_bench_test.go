package destinations

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/internal/netguard"
	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// BenchmarkScale measures N destinations made through the API (10,000;
// HOOKGATE_SCALE_N says otherwise), on each store, one run each
// (-benchtime 1x): bench/scale.sh runs it and bench/RESULTS.md holds its
// figures. HOOKGATE_SCALE_HEAPPROFILE=<file> writes the heap's profile
// where heap-B/dest is measured (go tool pprof -sample_index=inuse_space).
//
//   - heap-B/dest: the process's heap per idle destination, the registry's
//     and the sender's, after a GC, with the sender running;
//   - redis-B/dest: Redis's used_memory per destination (its record and
//     first-seen time);
//   - goroutines: those the running sender holds beyond its own, idle;
//   - idle-writes: the store's writes while the N sit idle for 3 s
//     (Redis's dirty counter; bbolt's last transaction ID);
//   - scan-ms: one Queue.Due over the N (what the sender's scan reads
//     every poll);
//   - apply-ms-p50/max: from a change returned on one instance until the
//     other instance's sender has it (Redis: two registries and senders
//     polling one Redis), over 20 changes;
//   - publish-ms and enqueue1000-ms: one event fanned out to 1,000
//     subscribers (Sender.Publish), beside 1,000 single enqueues of one
//     event each to the same 1,000, in the same run.
func BenchmarkScale(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("HOOKGATE_SCALE_N")); err == nil && v >= 1000 {
		n = v
	}
	b.Run("bolt", func(b *testing.B) {
		db := bolttest.Open(b, nil)
		q, err := boltqueue.New(db, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		runScale(b, n, scaleStore{
			backend: func() Backend { return NewBolt(db) },
			queue:   func() sender.Queue { return q },
			writes:  func() int64 { return boltTxID(b, db) },
		})
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		prefix := redistest.Prefix("scale")
		client := func() redis.UniversalClient {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			b.Cleanup(func() { _ = rdb.Close() })
			return rdb
		}
		rdb := client()
		runScale(b, n, scaleStore{
			backend: func() Backend { return NewRedis(client(), prefix) },
			queue:   func() sender.Queue { return redisqueue.New(client(), prefix, time.Hour) },
			writes:  func() int64 { return redisInfo(b, rdb, "persistence", "rdb_changes_since_last_save") },
			memory:  func() int64 { return redisInfo(b, rdb, "memory", "used_memory") },
			shared:  true,
		})
	})
}

// scaleStore is one store under BenchmarkScale.
type scaleStore struct {
	backend func() Backend      // a handle on the records, as an instance has
	queue   func() sender.Queue // a handle on the queue, as an instance has
	writes  func() int64        // a counter of the store's writes
	memory  func() int64        // the store's memory (nil: not measured)
	shared  bool                // two instances can share it
}

// instance is one gateway's registry and sender.
type instance struct {
	reg    *Registry
	sender *sender.Sender
	mu     sync.Mutex
	seen   map[string]string // name -> the Rev applied, of the watched names
	watch  func(name string) bool
	notify chan struct{}
}

func newInstance(b *testing.B, st scaleStore, watch func(string) bool) *instance {
	in := &instance{seen: map[string]string{}, watch: watch, notify: make(chan struct{}, 1)}
	guard := netguard.New(netguard.Options{})
	s, err := sender.New(st.queue(), sender.Config{}, nil, sender.Options{Guard: guard})
	if err != nil {
		b.Fatal(err)
	}
	in.sender = s
	in.reg, err = New(st.backend(), Options{Key: key, Apply: func(ds []sender.Destination) error {
		if err := s.Apply(ds); err != nil {
			return err
		}
		in.mu.Lock()
		for _, d := range ds {
			if in.watch(d.Name) { // what the apply timing waits for
				in.seen[d.Name] = d.Rev
			}
		}
		in.mu.Unlock()
		select {
		case in.notify <- struct{}{}:
		default:
		}
		return nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	return in
}

func runScale(b *testing.B, n int, st scaleStore) {
	ctx := b.Context()
	// The records, sealed, as n creates would store them: 1,000
	// subscribe to seat.*, the rest to other.*.
	backend := st.backend()
	now := time.Now().UTC()
	for i := range n {
		events := []string{"other.*"}
		if i < 1000 {
			events = []string{"seat.*"}
		}
		o := &opened{record: record{Name: fmt.Sprintf("customer-%05d", i), URL: fmt.Sprintf("https://hooks-%05d.example/in", i),
			Scheme: "standard", Events: events, Created: now, Updated: now, Rev: 1}, secret: newSecret()}
		raw, err := o.marshal(mustSealer(b))
		if err != nil {
			b.Fatal(err)
		}
		if err := backend.Put(ctx, o.Name, nil, raw); err != nil {
			b.Fatal(err)
		}
	}
	var memBefore int64
	if st.memory != nil {
		memBefore = st.memory()
	}

	if os.Getenv("HOOKGATE_SCALE_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 1 // every allocation, for the profile's attribution
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore, goBefore := ms.HeapAlloc, runtime.NumGoroutine()
	changed := func(i int) string { return fmt.Sprintf("customer-%05d", n/2+i) } // the 20 the apply timing changes
	watch := func(name string) bool { return name >= changed(0) && name <= changed(19) }
	a := newInstance(b, st, watch)
	coldStart := time.Now()
	if err := a.reg.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	cold := time.Since(coldStart)
	if got := len(a.sender.Destinations()); got != n {
		b.Fatalf("applied %d destinations, want %d", got, n)
	}
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer func() { stop(); running.Wait() }()
	running.Go(func() { a.sender.Run(runCtx) })
	running.Go(func() { a.reg.Run(runCtx) })
	time.Sleep(2 * time.Second) // the first scans and first-seen writes
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapPer := float64(int64(ms.HeapAlloc)-int64(heapBefore)) / float64(n)
	if path := os.Getenv("HOOKGATE_SCALE_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
		_ = f.Close()
	}
	goroutines := runtime.NumGoroutine() - goBefore

	w0 := st.writes()
	time.Sleep(3 * time.Second)
	idleWrites := st.writes() - w0

	names := a.sender.Destinations()
	scanStart := time.Now()
	for i := 0; i < len(names); i += 1000 {
		if _, err := st.queue().Due(ctx, names[i:min(i+1000, len(names))], time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	scan := time.Since(scanStart)

	b.ReportMetric(heapPer, "heap-B/dest")
	b.ReportMetric(float64(goroutines), "goroutines")
	b.ReportMetric(float64(idleWrites), "idle-writes")
	b.ReportMetric(float64(scan.Microseconds())/1000, "scan-ms")
	b.ReportMetric(float64(cold.Milliseconds()), "cold-apply-ms")
	if st.memory != nil {
		b.ReportMetric(float64(st.memory()-memBefore)/float64(n), "redis-B/dest")
	}

	// A change on one instance, until the other's sender has it.
	other := a
	if st.shared {
		other = newInstance(b, st, watch)
		if err := other.reg.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		running.Go(func() { other.reg.Run(runCtx) })
	}
	var applies []time.Duration
	for i := range 20 {
		name := changed(i)
		other.mu.Lock()
		was := other.seen[name]
		other.mu.Unlock()
		desc := fmt.Sprint("change ", i)
		url := fmt.Sprintf("https://hooks-%05d.example/v%d", n/2+i, i)
		start := time.Now()
		if _, err := a.reg.Update(ctx, name, Patch{Description: &desc, URL: &url}); err != nil {
			b.Fatal(err)
		}
		for {
			other.mu.Lock()
			rev := other.seen[name]
			other.mu.Unlock()
			if rev != was {
				break
			}
			select {
			case <-other.notify:
			case <-time.After(5 * time.Second):
				b.Fatalf("the other instance did not apply %s in 5s", name)
			}
		}
		applies = append(applies, time.Since(start))
	}
	slices.Sort(applies)
	b.ReportMetric(float64(applies[len(applies)/2].Microseconds())/1000, "apply-ms-p50")
	b.ReportMetric(float64(applies[len(applies)-1].Microseconds())/1000, "apply-ms-max")

	// One event to 1,000 subscribers, beside 1,000 single enqueues,
	// through an instance whose sender does not run, the others stopped:
	// what the store costs, without the deliveries the envelopes start.
	stop()
	running.Wait()
	pub := newInstance(b, st, func(string) bool { return false })
	if err := pub.reg.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"type":"seat.released","seat":"A1"}`)
	var publishes, singles []time.Duration
	for round := range 3 {
		start := time.Now()
		res, err := pub.sender.Publish(ctx, &sender.Event{ID: fmt.Sprint("evt_fan_", round), EventType: "seat.released", Payload: payload})
		if err != nil || len(res.Deliveries) != 1000 {
			b.Fatalf("publish: %d deliveries, %v", len(res.Deliveries), err)
		}
		publishes = append(publishes, time.Since(start))
		start = time.Now()
		for i := range 1000 {
			if _, err := pub.sender.Enqueue(ctx, &sender.Envelope{ID: fmt.Sprint("evt_one_", round), Destination: fmt.Sprintf("customer-%05d", i),
				EventType: "seat.released", Payload: payload}); err != nil {
				b.Fatal(err)
			}
		}
		singles = append(singles, time.Since(start))
	}
	slices.Sort(publishes)
	slices.Sort(singles)
	b.ReportMetric(float64(publishes[1].Microseconds())/1000, "publish-ms")
	b.ReportMetric(float64(singles[1].Microseconds())/1000, "enqueue1000-ms")
}

func mustSealer(b *testing.B) sealer {
	s, err := newSealer(key)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// boltTxID is the ID of db's last committed transaction: it moves with
// every write.
func boltTxID(b *testing.B, db *bolt.DB) int64 {
	var id int
	if err := db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		b.Fatal(err)
	}
	return int64(id)
}

// redisInfo is the integer field of INFO section.
func redisInfo(b *testing.B, rdb redis.UniversalClient, section, field string) int64 {
	info, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatalf("INFO %s has no %s", section, field)
	return 0
}
