// Command sendbench measures hookgate's sender on Redis, as bench/sender.sh
// runs it beside BullMQ and asynq: a loopback receiver that answers 200,
// a run that queues N envelopes of a 500-byte payload (Redis memory is
// read before and after), then delivers them with C workers; and the
// limit they are measured against, a bare Go HTTP client loop: C
// goroutines POSTing the same payload to the same receiver as fast as
// they can, a keep-alive connection each, no queue and no signature.
//
//	sendbench receiver -addr 127.0.0.1:9000
//	sendbench run -redis 127.0.0.1:6379 -receiver http://127.0.0.1:9000 -n 20000 -c 20
//	sendbench bare -receiver http://127.0.0.1:9000 -n 20000 -c 20
//
// run -entities E spreads the envelopes over E entities, round robin
// (each payload names its entity and its place in it, and the receiver
// counts, per entity, deliveries out of enqueue order and the most it
// had in flight at once: GET /order); -ordering entity orders them
// (issue 33); -store bolt runs on the embedded queue in a temporary
// file in place of Redis (no memory figure).
//
// run -cpuprofile FILE writes a CPU profile of the deliveries (not of the
// enqueues). run -min-replicas N makes the queue's writes wait for N
// replicas (the store's min_replicas: WAIT after each enqueue and settle),
// within -replica-timeout. Each line also gives the CPU time per delivery of the process
// (and of redis-server, for run): on a busy machine, steadier than the
// rates; and run's, the allocations per delivery, the mean time of an
// enqueue (sent one at a time: a latency), the WAITs Redis ran per
// delivery and the writes whose replicas fell short.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/boltfile"
	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/internal/replicas"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/sender/redisqueue"
	"github.com/hookgate/hookgate/verify"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: sendbench receiver|run [flags]")
	}
	switch os.Args[1] {
	case "receiver":
		receiver(os.Args[2:])
	case "run":
		run(os.Args[2:])
	case "bare":
		bare(os.Args[2:])
	default:
		log.Fatalf("unknown mode %q", os.Args[1]) //nolint:gosec // G706: %q quotes it, so it cannot forge a log line
	}
}

// receiver answers every POST with -status (default 200) and counts them;
// GET /count reads the count, DELETE /count resets it and the order
// checks. GET /order reads "<out of order> <most in flight>" over the
// entities the payloads name.
func receiver(args []string) {
	fs := flag.NewFlagSet("receiver", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "listen address")
	status := fs.Int("status", http.StatusOK, "the status every POST is answered with")
	_ = fs.Parse(args) // ExitOnError: Parse exits rather than return an error
	var n atomic.Int64
	var ord orderCheck
	// A loopback benchmark server: timeouts would only add to what it measures.
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { //nolint:gosec // G114: see above
		switch {
		case r.URL.Path == "/count" && r.Method == http.MethodGet:
			_, _ = fmt.Fprint(w, n.Load()) // a client gone away has nothing to be told
		case r.URL.Path == "/count" && r.Method == http.MethodDelete:
			n.Store(0)
			ord.reset()
		case r.URL.Path == "/order" && r.Method == http.MethodGet:
			_, _ = fmt.Fprint(w, ord.String())
		default:
			body, _ := io.ReadAll(r.Body)
			entity, seq, ok := entityOf(body)
			if ok {
				ord.begin(entity, seq)
			}
			n.Add(1)
			w.WriteHeader(*status)
			if ok {
				ord.end(entity)
			}
		}
	})))
}

// usedMemory reads INFO memory's used_memory (0 without Redis).
func usedMemory(ctx context.Context, rdb *redis.Client) int64 {
	if rdb == nil {
		return 0
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	log.Fatal("no used_memory in INFO")
	return 0
}

// redisCPU reads INFO cpu: the server's CPU time so far, user and system
// (0 without Redis).
func redisCPU(ctx context.Context, rdb *redis.Client) time.Duration {
	if rdb == nil {
		return 0
	}
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		log.Fatal(err)
	}
	cpu, err := redistest.CPU(info)
	if err != nil {
		log.Fatal(err)
	}
	return cpu
}

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mallocs is how many heap objects this process has allocated so far.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// perDelivery is d over n deliveries, in µs.
func perDelivery(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

func count(url string) int64 {
	resp, err := http.Get(url + "/count")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end: nothing to lose
	b, _ := io.ReadAll(resp.Body)
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

// payload is the event every run sends: 500 bytes of JSON.
var payload = []byte(`{"type":"reservation.confirmed","data":"` + strings.Repeat("x", 500-44) + `"}`)

// entityPayload is payload's size, naming its entity and its place in it.
func entityPayload(entity string, seq int) []byte {
	head := fmt.Sprintf(`{"entity":%q,"seq":%d,"data":"`, entity, seq)
	return []byte(head + strings.Repeat("x", max(0, len(payload)-len(head)-2)) + `"}`)
}

// entityOf reads what entityPayload wrote.
func entityOf(body []byte) (entity string, seq int, ok bool) {
	var v struct {
		Entity string `json:"entity"`
		Seq    int    `json:"seq"`
	}
	if !bytes.HasPrefix(body, []byte(`{"entity":`)) || json.Unmarshal(body, &v) != nil {
		return "", 0, false
	}
	return v.Entity, v.Seq, true
}

// orderCheck counts, per entity, the deliveries that came before one
// enqueued earlier, and the most one entity had in flight at once.
type orderCheck struct {
	mu         sync.Mutex
	last       map[string]int
	inFlight   map[string]int
	outOfOrder int
	most       int
}

func (o *orderCheck) begin(entity string, seq int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last, o.inFlight = map[string]int{}, map[string]int{}
	}
	if last, ok := o.last[entity]; ok && seq < last {
		o.outOfOrder++
	}
	o.last[entity] = max(o.last[entity], seq)
	o.inFlight[entity]++
	o.most = max(o.most, o.inFlight[entity])
}

func (o *orderCheck) end(entity string) {
	o.mu.Lock()
	o.inFlight[entity]--
	o.mu.Unlock()
}

func (o *orderCheck) reset() {
	o.mu.Lock()
	o.last, o.inFlight, o.outOfOrder, o.most = nil, nil, 0, 0
	o.mu.Unlock()
}

func (o *orderCheck) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("%d %d", o.outOfOrder, o.most)
}

// orderFigures reads the receiver's GET /order.
func orderFigures(url string) string {
	resp, err := http.Get(url + "/order")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end: nothing to lose
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// resetCount sets the receiver's count to 0. A receiver that is not up
// fails the count that follows, which is fatal.
func resetCount(rcv string) {
	req, _ := http.NewRequest(http.MethodDelete, rcv+"/count", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}

// bare POSTs the payload n times from c goroutines, each with a
// keep-alive connection of its own (the transport keeps c idle per
// host), and times it as run does: from the first request to the nth
// received.
func bare(args []string) {
	fs := flag.NewFlagSet("bare", flag.ExitOnError)
	rcv := fs.String("receiver", "http://127.0.0.1:9000", "the receiver")
	n := fs.Int("n", 20000, "requests")
	c := fs.Int("c", 20, "goroutines")
	_ = fs.Parse(args) // ExitOnError: Parse exits rather than return an error
	resetCount(*rcv)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = *c
	client := &http.Client{Transport: t}
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := selfCPU()
	start := time.Now()
	for range *c {
		wg.Go(func() {
			for next.Add(1) <= int64(*n) {
				req, _ := http.NewRequest(http.MethodPost, *rcv+"/hooks", bytes.NewReader(payload))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					log.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
	wg.Wait()
	for count(*rcv) < int64(*n) {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	fmt.Printf("bare deliveries/s %.0f bytes/envelope 0 client_cpu_us %.1f\n", float64(*n)/elapsed.Seconds(), perDelivery(selfCPU()-cpu0, *n))
}

func run(args []string) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	addr := fs.String("redis", "127.0.0.1:6379", "Redis address")
	storeKind := fs.String("store", "redis", "redis, or bolt: the embedded queue in a temporary file")
	rcv := fs.String("receiver", "http://127.0.0.1:9000", "the receiver")
	n := fs.Int("n", 20000, "envelopes")
	c := fs.Int("c", 20, "workers")
	entities := fs.Int("entities", 0, "spread the envelopes over this many entities, round robin (0: none)")
	ordering := fs.String("ordering", "none", "the destination's ordering: none or entity (on_dead skip)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the deliveries to this file")
	minReplicas := fs.Int("min-replicas", 0, "the replicas each enqueue and settle waits for (min_replicas)")
	replicaTimeout := fs.Duration("replica-timeout", replicas.DefaultTimeout, "how long a write waits for its replicas")
	_ = fs.Parse(args) // ExitOnError: Parse exits rather than return an error
	order, err := sender.ParseOrdering(*ordering, "")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	resetCount(*rcv)

	var (
		q     sender.Queue
		rdb   *redis.Client
		repl  *replicas.Waiter
		opts  sender.Options
		label = "hookgate"
	)
	switch *storeKind {
	case "redis":
		rdb = redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 64})
		defer func() { _ = rdb.Close() }() // the process ends here; the pool goes with it
		prefix := fmt.Sprintf("bench%d", time.Now().UnixNano())
		rq := redisqueue.New(rdb, prefix, 168*time.Hour)
		if *minReplicas > 0 {
			// As store.Open wires min_replicas into the gateway's queue.
			repl = replicas.New(rdb, *minReplicas, *replicaTimeout, slog.Default())
			rq.WaitForReplicas(repl)
		}
		// The breakers shared on Redis, as the gateway shares them on a
		// Redis store.
		q, opts.Breakers = rq, redisqueue.NewBreakers(rdb, prefix)
	case "bolt":
		dir, err := os.MkdirTemp("", "sendbench")
		if err != nil {
			log.Fatal(err)
		}
		defer func() { _ = os.RemoveAll(dir) }() // a benchmark's scratch file
		db, err := boltfile.OpenFile(filepath.Join(dir, "hookgate.db"), time.Second, false, false)
		if err != nil {
			log.Fatal(err)
		}
		defer func() { _ = db.Close() }() // the process ends here
		if q, err = boltqueue.New(db, 168*time.Hour); err != nil {
			log.Fatal(err)
		}
		label = "hookgate-bolt"
	default:
		log.Fatalf("-store %q: want redis or bolt", *storeKind) //nolint:gosec // G706: %q quotes it
	}
	signer, _ := verify.New("standard", []string{"whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA=="}, verify.Options{})
	s, err := sender.New(q, sender.Config{Workers: *c, Batch: *c, Poll: 10 * time.Millisecond},
		[]sender.Destination{{Name: "bench", URL: *rcv + "/hooks", Signer: signer, Workers: *c, Ordering: order}}, opts)
	if err != nil {
		log.Fatal(err)
	}
	before := usedMemory(ctx, rdb)
	now := time.Now()
	for i := range *n {
		e := &sender.Envelope{ID: fmt.Sprintf("evt_%08d", i), Destination: "bench", EventType: "reservation.confirmed", CreatedAt: now, NextAt: now, Payload: payload}
		if *entities > 0 {
			e.Entity = fmt.Sprintf("ent_%06d", i%*entities)
			e.Payload = entityPayload(e.Entity, i / *entities)
		}
		if _, err := q.Enqueue(ctx, e); err != nil {
			log.Fatal(err)
		}
	}
	enqueueUS := perDelivery(time.Since(now), *n) // one at a time: a latency, not a rate
	after := usedMemory(ctx, rdb)

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }() // a profile cut short is still read
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	cpu0, rcpu0, m0, w0 := selfCPU(), redisCPU(ctx, rdb), mallocs(), waits(ctx, rdb)
	start := time.Now()
	go func() { s.Run(runCtx); close(done) }()
	for count(*rcv) < int64(*n) {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cpu, rcpu, allocs, nwait := selfCPU()-cpu0, redisCPU(ctx, rdb)-rcpu0, mallocs()-m0, waits(ctx, rdb)-w0
	stop()
	<-done
	var short int64 // writes whose replicas fell short (a nil Waiter's are 0)
	for _, v := range repl.Counts() {
		short += v
	}
	var outOfOrder, most int
	_, _ = fmt.Sscan(orderFigures(*rcv), &outOfOrder, &most) // "0 0" when no payload names an entity
	fmt.Printf("%s deliveries/s %.0f bytes/envelope %.1f sender_cpu_us %.1f redis_cpu_us %.1f allocs %.0f enqueue_us %.1f waits_per_delivery %.3f shortfalls %d out_of_order %d most_in_flight %d\n", label, float64(*n)/elapsed.Seconds(), float64(after-before)/float64(*n),
		perDelivery(cpu, *n), perDelivery(rcpu, *n), float64(allocs)/float64(*n), enqueueUS, float64(nwait)/float64(*n), short, outOfOrder, most)
}

// waits is how many WAIT commands Redis has run (INFO commandstats'
// cmdstat_wait calls; 0 before the first, or without Redis).
func waits(ctx context.Context, rdb *redis.Client) int64 {
	if rdb == nil {
		return 0
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_wait:calls="); ok {
			v, _, _ = strings.Cut(v, ",")
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
