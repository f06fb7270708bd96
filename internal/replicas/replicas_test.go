package replicas

import (
	"bytes"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
)

// incrScript increments KEYS[1] and answers its new value: a value above
// 1 after one Run means the script ran twice.
var incrScript = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

// replicated starts a master and a replica of it, and returns clients of
// both once the master reports the replica online.
func replicated(t *testing.T) (master, replica *redis.Client) {
	t.Helper()
	m, r := redistest.StartReplicated(t)
	return client(t, m.Addr()), client(t, r.Addr())
}

func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// zeroCounts is Counts of a Waiter without a shortfall.
func zeroCounts() map[string]int64 {
	m := map[string]int64{}
	for _, op := range Ops {
		m[op.Name] = 0
	}
	return m
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestWithReplicaWritesAreAcknowledged: on a master with one replica, a
// write through Do or Run waits for it: the replica holds the write as
// soon as the call returns, and nothing is short.
func TestWithReplicaWritesAreAcknowledged(t *testing.T) {
	master, replica := replicated(t)
	w := New(master, 1, 5*time.Second, discard())
	ctx := t.Context()

	if err := w.Do(ctx, Claim, "a", redis.NewStatusCmd(ctx, "set", "a", "1")); err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
	if got, err := replica.Get(ctx, "a").Result(); err != nil || got != "1" {
		t.Errorf("the replica's a = %q, %v right after Do; want 1", got, err)
	}
	v, err := w.Run(ctx, Enqueue, incrScript, []string{"b"}).Int()
	if err != nil || v != 1 {
		t.Fatalf("Run = %d, %v; want 1, nil", v, err)
	}
	if got, err := replica.Get(ctx, "b").Result(); err != nil || got != "1" {
		t.Errorf("the replica's b = %q, %v right after Run; want 1", got, err)
	}
	if diff := cmp.Diff(zeroCounts(), w.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

// TestLoneMasterFallsShort: with no replica, a refusing op's write is
// refused with a *Shortfall, yet it is on the master; a non-refusing
// op's is not an error. Each is counted under its op.
func TestLoneMasterFallsShort(t *testing.T) {
	master := client(t, redistest.Start(t).Addr())
	w := New(master, 1, 50*time.Millisecond, discard())
	ctx := t.Context()

	err := w.Do(ctx, Claim, "a", redis.NewStatusCmd(ctx, "set", "a", "1"))
	if !errors.Is(err, ErrShortfall) {
		t.Fatalf("Do(Claim) = %v, want ErrShortfall", err)
	}
	var s *Shortfall
	if !errors.As(err, &s) || *s != (Shortfall{Op: "claim", Want: 1, Got: 0}) {
		t.Errorf("Do(Claim)'s shortfall = %+v, want claim 0 of 1", s)
	}
	if got, err := master.Get(ctx, "a").Result(); err != nil || got != "1" {
		t.Errorf("the master's a = %q, %v; want 1 (a shortfall undoes nothing)", got, err)
	}

	if err := w.Do(ctx, Record, "c", redis.NewStatusCmd(ctx, "set", "c", "1")); err != nil {
		t.Errorf("Do(Record) = %v, want nil: its answer was given", err)
	}
	cmd := w.Run(ctx, Enqueue, incrScript, []string{"b"})
	if !errors.Is(cmd.Err(), ErrShortfall) {
		t.Errorf("Run(Enqueue) = %v, want ErrShortfall", cmd.Err())
	}
	if v, err := w.Run(ctx, Settle, incrScript, []string{"b"}).Int(); err != nil || v != 2 {
		t.Errorf("Run(Settle) = %d, %v; want 2, nil", v, err)
	}

	want := zeroCounts()
	want["claim"], want["record"], want["enqueue"], want["settle"] = 1, 1, 1, 1
	if diff := cmp.Diff(want, w.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

// TestCommandErrorIsNotAShortfall: a command's own error is the answer,
// not a shortfall, and is not counted.
func TestCommandErrorIsNotAShortfall(t *testing.T) {
	master := client(t, redistest.Start(t).Addr())
	w := New(master, 1, 50*time.Millisecond, discard())
	ctx := t.Context()
	if err := master.Set(ctx, "s", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err := w.Do(ctx, Claim, "s", redis.NewIntCmd(ctx, "incr", "s"))
	if err == nil || errors.Is(err, ErrShortfall) {
		t.Errorf("Do(INCR of a string) = %v, want INCR's own error", err)
	}
	if diff := cmp.Diff(zeroCounts(), w.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

// TestShortfallsLogOncePerInterval: three shortfalls of an op in a row
// log one line; the next one after LogEvery logs again, with the
// shortfalls since the last line. Another op logs on its own.
func TestShortfallsLogOncePerInterval(t *testing.T) {
	var buf bytes.Buffer
	w := New(nil, 1, 0, slog.New(slog.NewTextHandler(&buf, nil)))
	now := time.Unix(1_800_000_000, 0)
	w.now = func() time.Time { return now }

	for range 3 {
		if err := w.Check(Record, 0); err != nil {
			t.Fatalf("Check(Record) = %v, want nil", err)
		}
	}
	if got := lines(&buf); len(got) != 1 || !strings.Contains(got[0], "op=record") || !strings.Contains(got[0], "shortfalls=1") {
		t.Fatalf("after 3 shortfalls the log is %q, want one line of op=record, shortfalls=1", got)
	}
	if err := w.Check(Enqueue, 0); !errors.Is(err, ErrShortfall) {
		t.Errorf("Check(Enqueue) = %v, want ErrShortfall", err)
	}
	if got := lines(&buf); len(got) != 2 || !strings.Contains(got[1], "op=enqueue") {
		t.Fatalf("another op's shortfall: the log is %q, want a second line of op=enqueue", got)
	}

	now = now.Add(LogEvery - time.Millisecond)
	_ = w.Check(Record, 0)
	if got := lines(&buf); len(got) != 2 {
		t.Fatalf("within LogEvery the log is %q, want still 2 lines", got)
	}
	now = now.Add(time.Millisecond)
	_ = w.Check(Record, 0)
	got := lines(&buf)
	if len(got) != 3 || !strings.Contains(got[2], "op=record") || !strings.Contains(got[2], "shortfalls=4") {
		t.Fatalf("after LogEvery the log is %q, want a third line of op=record, shortfalls=4", got)
	}
	if c := w.Counts(); c["record"] != 5 || c["enqueue"] != 1 {
		t.Errorf("Counts = %v, want record 5, enqueue 1", c)
	}
	if err := w.Check(Record, 1); err != nil || w.Counts()["record"] != 5 {
		t.Errorf("Check(Record, enough) = %v with record count %d, want nil and still 5", err, w.Counts()["record"])
	}
}

func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestNilWaiterWaitsForNone: a nil Waiter refuses nothing and counts
// nothing.
func TestNilWaiterWaitsForNone(t *testing.T) {
	var w *Waiter
	if err := w.Check(Enqueue, 0); err != nil {
		t.Errorf("nil Waiter: Check = %v; want nil", err)
	}
	if diff := cmp.Diff(zeroCounts(), w.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

// TestRunLoadsAFlushedScript: a master that does not hold the script
// (never loaded, then SCRIPT FLUSH) answers NOSCRIPT; Run loads it there
// and runs it once, not twice, and the write still waits for the replica.
func TestRunLoadsAFlushedScript(t *testing.T) {
	master, replica := replicated(t)
	w := New(master, 1, 5*time.Second, discard())
	ctx := t.Context()

	for i, flush := range []bool{true, false, true} {
		if flush {
			if err := master.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		v, err := w.Run(ctx, Settle, incrScript, []string{"n"}).Int()
		if err != nil || v != i+1 {
			t.Fatalf("Run %d (flushed first: %v) = %d, %v; want %d, nil: the script runs once per Run", i+1, flush, v, err, i+1)
		}
		if got, err := replica.Get(ctx, "n").Int(); err != nil || got != i+1 {
			t.Errorf("after Run %d the replica's n = %d, %v; want %d", i+1, got, err, i+1)
		}
	}
	if diff := cmp.Diff(zeroCounts(), w.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

// clusterClient is a Cluster client of c's nodes, closed with the test.
func clusterClient(t *testing.T, c *redistest.Cluster) *redis.ClusterClient {
	t.Helper()
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr())
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestClusterWaitsOnTheSlotsMaster: on a Cluster of three masters with a
// replica each, Do and Run send the write and WAIT to the master of the
// key's slot: writes on keys of two masters are acknowledged, none short.
func TestClusterWaitsOnTheSlotsMaster(t *testing.T) {
	c := redistest.StartReplicatedCluster(t)
	rdb := clusterClient(t, c)
	w := New(rdb, 1, 5*time.Second, discard())
	ctx := t.Context()

	keys := keysOnTwoMasters(t, c)
	for _, k := range keys {
		v, err := w.Run(ctx, Enqueue, incrScript, []string{k}).Int()
		if err != nil || v != 1 {
			t.Errorf("Run on %s (master %s) = %d, %v; want 1, nil", k, c.MasterOf(k).Addr(), v, err)
		}
		if err := w.Do(ctx, Claim, k, redis.NewIntCmd(ctx, "incr", k)); err != nil {
			t.Errorf("Do on %s = %v, want nil", k, err)
		}
	}
	if diff := cmp.Diff(zeroCounts(), w.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	for _, k := range keys {
		if got, err := rdb.Get(ctx, k).Int(); err != nil || got != 2 {
			t.Errorf("%s = %d, %v; want 2", k, got, err)
		}
	}
}

// TestClusterShortfallIsTheSlotsMaster: with the replica of one master
// stopped, writes on that master's keys fall short and writes on another
// master's keys do not: each WAIT went to its write's master.
func TestClusterShortfallIsTheSlotsMaster(t *testing.T) {
	c := redistest.StartReplicatedCluster(t)
	rdb := clusterClient(t, c)
	ctx := t.Context()
	keys := keysOnTwoMasters(t, c)
	short, whole := keys[0], keys[1]
	stopReplicaOf(t, c, c.MasterOf(short))
	w := New(rdb, 1, 100*time.Millisecond, discard())

	// A WAIT sent to a random node would be answered by the wrong master
	// now and then: a few rounds.
	for range 5 {
		if err := w.Run(ctx, Enqueue, incrScript, []string{short}).Err(); !errors.Is(err, ErrShortfall) {
			t.Errorf("Run on %s, whose master lost its replica = %v, want ErrShortfall", short, err)
		}
		if err := w.Run(ctx, Enqueue, incrScript, []string{whole}).Err(); err != nil {
			t.Errorf("Run on %s, whose master has its replica = %v, want nil", whole, err)
		}
	}
	if got := w.Counts()["enqueue"]; got != 5 {
		t.Errorf("enqueue shortfalls = %d, want 5", got)
	}
}

// stopReplicaOf stops master's replica, and waits until master has none
// online.
func stopReplicaOf(t *testing.T, c *redistest.Cluster, master *redistest.Server) {
	t.Helper()
	m := client(t, master.Addr())
	in, err := m.Info(t.Context(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(in, "slave0:")
	_, rest, ok2 := strings.Cut(rest, "port=")
	port, _, _ := strings.Cut(rest, ",")
	if !ok || !ok2 {
		t.Fatalf("%s has no replica: %s", master.Addr(), in)
	}
	for _, n := range c.Nodes {
		if strconv.Itoa(n.Port) == port {
			n.Stop()
			redistest.WaitReplicas(t, master, 0)
			return
		}
	}
	t.Fatalf("%s's replica on port %s is not a node of the cluster", master.Addr(), port)
}

// keysOnTwoMasters are two keys whose slots two different masters serve.
func keysOnTwoMasters(t *testing.T, c *redistest.Cluster) []string {
	t.Helper()
	first := "{k0}"
	m := c.MasterOf(first)
	for i := 1; i < 100; i++ {
		k := "{k" + strconv.Itoa(i) + "}"
		if c.MasterOf(k) != m {
			return []string{first, k}
		}
	}
	t.Fatal("100 keys all on one master")
	return nil
}
