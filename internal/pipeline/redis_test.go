package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
)

// TestClusterPipelineSplitsByNode: one pipeline holding keys of every
// slot range goes to a real three-master Cluster; go-redis splits it by
// node, and every command lands on its key's node and gets its own
// answer, a failing one included.
func TestClusterPipelineSplitsByNode(t *testing.T) {
	addrs := redistest.StartCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	b := New(rdb, 0)
	ctx := t.Context()

	const n = 200
	var cmds []redis.Cmder
	for i := range n {
		cmds = append(cmds, redis.NewStatusCmd(ctx, "set", fmt.Sprintf("{k%d}", i), fmt.Sprintf("v%d", i)))
	}
	bad := redis.NewIntCmd(ctx, "incr", "{k7}") // its value is not an integer
	cmds = append(cmds, bad)
	gets := make([]*redis.StringCmd, n)
	for i := range n {
		gets[i] = redis.NewStringCmd(ctx, "get", fmt.Sprintf("{k%d}", i))
		cmds = append(cmds, gets[i])
	}
	if err := b.Do(ctx, cmds...); err == nil {
		t.Fatal("Do = nil, want the failing command's error")
	}
	if bad.Err() == nil {
		t.Error("INCR of a string succeeded")
	}
	masters := map[string]bool{}
	for i := range n {
		if got, want := gets[i].Val(), fmt.Sprintf("v%d", i); gets[i].Err() != nil || got != want {
			t.Errorf("GET {k%d} = %q, %v; want %q", i, got, gets[i].Err(), want)
		}
		node, err := rdb.MasterForKey(ctx, fmt.Sprintf("{k%d}", i))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Errorf("the keys live on %d masters, want all 3", len(masters))
	}
	if st := b.Stats(); st.Pipelines != 1 {
		t.Errorf("sent %d pipelines, want 1", st.Pipelines)
	}
}

// TestSingleNodeAnswersPerCommand: on a single node too, a command's
// error is its own.
func TestSingleNodeAnswersPerCommand(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	b := New(rdb, 0)
	ctx := context.Background()
	set := redis.NewStatusCmd(ctx, "set", "a", "x")
	bad := redis.NewIntCmd(ctx, "incr", "a")
	get := redis.NewStringCmd(ctx, "get", "a")
	if err := b.Do(ctx, set, bad, get); err == nil || err != bad.Err() {
		t.Fatalf("Do = %v, want INCR's error", err)
	}
	if set.Err() != nil || get.Val() != "x" {
		t.Errorf("SET = %v, GET = %q %v; want OK and x", set.Err(), get.Val(), get.Err())
	}
}
