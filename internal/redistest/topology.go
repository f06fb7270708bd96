package redistest

// Replicated topologies for the failover tests: a Sentinel group (a
// master, two replicas, three Sentinels) and a Cluster of three masters
// with a replica each, with helpers to SIGKILL a master and wait until its
// replica took over. The waits poll, with a bound; none sleeps for luck.

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the Sentinel group monitors.
const SentinelMaster = "mymaster"

// Sentinel timings: a master silent for sentinelDownAfter is subjectively
// down, and a failover that stalls is retried after sentinelFailoverTimeout.
// Small, so that a failover takes a second or two on loopback, but not so
// small that a loaded 2-core machine fails a live master over.
const (
	sentinelDownAfter       = 1000 * time.Millisecond
	sentinelFailoverTimeout = 5000 * time.Millisecond
)

// SentinelGroup is one master, two replicas and three Sentinels (quorum
// 2) monitoring them under SentinelMaster.
type SentinelGroup struct {
	t testing.TB
	// Servers are the data nodes, the first master at start.
	Servers []*Server
	// Sentinels are the Sentinels' host:port addresses.
	Sentinels []string
	// Proxy is the delayed link the replicas replicate through, with
	// ReplicationDelay; nil without.
	Proxy *DelayProxy
}

// SentinelOption changes the group StartSentinelGroup starts.
type SentinelOption func(*sentinelConfig)

// sentinelConfig is what the options set.
type sentinelConfig struct {
	replicationDelay time.Duration
}

// ReplicationDelay puts the replicas behind a DelayProxy that holds what
// the master sends them for d: they replicate from the proxy's address
// (replicaof), and are d behind the master instead of microseconds. What
// the proxy holds when the master dies is dropped, so a failover loses
// the master's last d of writes. The delay lasts until the first
// failover only: Sentinel reconfigures the surviving replica to
// replicate from the promoted master directly, without a proxy.
//
// Sentinel "fixes" a replica that replicates from an address other than
// its master's (+fix-slave-config), once the replica has been known for
// the failover timeout. With a delay the group's failover timeout is
// therefore delayedFailoverTimeout, and KillMaster fails the test if the
// replicas no longer replicate through the proxy.
func ReplicationDelay(d time.Duration) SentinelOption {
	return func(c *sentinelConfig) { c.replicationDelay = d }
}

// delayedFailoverTimeout is the failover timeout of a group with a
// ReplicationDelay: long enough that Sentinel leaves the replicas behind
// the proxy for a test's run up to the failover, short enough that a
// stalled failover is retried within WaitFailover's usual bound.
const delayedFailoverTimeout = 30 * time.Second

// StartSentinelGroup starts a master, two replicas (replicaof) and three
// Sentinels on free ports, and returns once every Sentinel knows the
// master, both replicas and the two other Sentinels: a failover can then
// be authorised. Everything is killed when the test ends.
func StartSentinelGroup(t testing.TB, opts ...SentinelOption) *SentinelGroup {
	t.Helper()
	skipShort(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not on PATH: install it (Debian: apt-get install redis-server); .ci/run does")
	}
	var cfg sentinelConfig
	for _, o := range opts {
		o(&cfg)
	}
	master := start(t, nil)
	g := &SentinelGroup{t: t, Servers: []*Server{master}}
	// The replicas replicate from the master, or from the proxy to it.
	// Either way they announce their own address (the master's INFO
	// names them by the connection's IP, 127.0.0.1, and their listening
	// port), so the Sentinels reach them directly.
	replicaOf := master.Port
	failoverTimeout := sentinelFailoverTimeout
	if cfg.replicationDelay > 0 {
		g.Proxy = StartDelayProxy(t, master.Addr(), cfg.replicationDelay)
		replicaOf = g.Proxy.Port()
		failoverTimeout = delayedFailoverTimeout
	}
	for range 2 {
		r := start(t, []string{"--replicaof", "127.0.0.1", strconv.Itoa(replicaOf)})
		g.Servers = append(g.Servers, r)
	}
	WaitReplicas(t, master, 2)
	for range 3 {
		g.Sentinels = append(g.Sentinels, startSentinel(t, master.Port, failoverTimeout))
	}
	// Sentinels find the replicas through the master's INFO and each
	// other through its hello channel, every second or two.
	poll(t, 20*time.Second, "the Sentinels to know each other and the replicas", func() (bool, string) {
		for _, addr := range g.Sentinels {
			m, err := sentinelMaster(addr)
			if err != nil {
				return false, err.Error()
			}
			if m["num-slaves"] != "2" || m["num-other-sentinels"] != "2" {
				return false, fmt.Sprintf("%s: num-slaves %s, num-other-sentinels %s", addr, m["num-slaves"], m["num-other-sentinels"])
			}
		}
		return true, ""
	})
	return g
}

// startSentinel starts one Sentinel monitoring the master on masterPort,
// with that failover timeout, and returns its address.
func startSentinel(t testing.TB, masterPort int, failoverTimeout time.Duration) string {
	t.Helper()
	addr := runSentinel(t, fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s %d\n"+
		"sentinel parallel-syncs %s 1\n",
		SentinelMaster, masterPort,
		SentinelMaster, sentinelDownAfter.Milliseconds(),
		SentinelMaster, failoverTimeout.Milliseconds(),
		SentinelMaster))
	poll(t, 10*time.Second, "sentinel "+addr+" to answer", func() (bool, string) {
		_, err := sentinelMaster(addr)
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return addr
}

// StoreURLs is the Sentinels as the store redis URLs: the Caddyfile's
// "store redis <urls> { sentinel_master mymaster }".
func (g *SentinelGroup) StoreURLs() string {
	var urls []string
	for _, a := range g.Sentinels {
		urls = append(urls, "redis://"+a)
	}
	return strings.Join(urls, " ")
}

// Master is the data node the first Sentinel names as master now.
func (g *SentinelGroup) Master() *Server {
	g.t.Helper()
	addr, err := masterAddr(g.Sentinels[0])
	if err != nil {
		g.t.Fatalf("asking sentinel %s for the master: %v", g.Sentinels[0], err)
	}
	s := g.server(addr)
	if s == nil {
		g.t.Fatalf("sentinel names %s as master, not a node of the group", addr)
	}
	return s
}

// server is the group's data node at addr, or nil.
func (g *SentinelGroup) server(addr string) *Server {
	for _, s := range g.Servers {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// KillMaster SIGKILLs the current master and returns it. With a
// ReplicationDelay, it first checks that the master's replicas still
// replicate through the proxy (see ReplicationDelay).
func (g *SentinelGroup) KillMaster() *Server {
	g.t.Helper()
	m := g.Master()
	if g.Proxy != nil {
		g.checkDelayed(m)
	}
	m.Stop()
	return m
}

// checkDelayed fails the test unless every data node other than master
// replicates from the proxy's port.
func (g *SentinelGroup) checkDelayed(master *Server) {
	g.t.Helper()
	want := "master_port:" + strconv.Itoa(g.Proxy.Port()) + "\r\n"
	for _, s := range g.Servers {
		if s == master || s.cmd == nil {
			continue
		}
		in, err := info(s.Addr(), "replication")
		if err != nil {
			g.t.Fatalf("INFO replication of %s: %v", s.Addr(), err)
		}
		if !strings.Contains(in, want) {
			g.t.Fatalf("replica %s no longer replicates through the delay proxy (Sentinel reconfigured it?):\n%s", s.Addr(), in)
		}
	}
}

// WaitFailover waits, up to within, until every Sentinel names a master
// other than old and that master accepts a write, and returns it.
func (g *SentinelGroup) WaitFailover(old *Server, within time.Duration) *Server {
	g.t.Helper()
	var promoted *Server
	poll(g.t, within, "a new master after "+old.Addr()+" died", func() (bool, string) {
		var addr string
		for _, s := range g.Sentinels {
			a, err := masterAddr(s)
			if err != nil {
				return false, err.Error()
			}
			if a == old.Addr() {
				return false, s + " still names " + a
			}
			if addr != "" && a != addr {
				return false, fmt.Sprintf("sentinels disagree: %s and %s", addr, a)
			}
			addr = a
		}
		promoted = g.server(addr)
		if promoted == nil {
			return false, "sentinel names " + addr + ", not a node of the group"
		}
		if err := acceptsWrite(promoted.Addr()); err != nil {
			return false, addr + ": " + err.Error()
		}
		return true, ""
	})
	return promoted
}

// masterAddr asks the Sentinel at addr for SentinelMaster's address.
func masterAddr(addr string) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer func() { _ = c.Close() }() // a probe
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hp, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	return hp[0] + ":" + hp[1], nil
}

// sentinelMaster is SENTINEL MASTER's fields from the Sentinel at addr.
func sentinelMaster(addr string) (map[string]string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer func() { _ = c.Close() }() // a probe
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Master(ctx, SentinelMaster).Result()
}

// StartReplicated starts a master and one replica of it, and returns
// them once the master counts the replica online. The master starts a
// diskless full sync at once (not after the default 5 s).
func StartReplicated(t testing.TB) (master, replica *Server) {
	t.Helper()
	master = StartWith(t, "--repl-diskless-sync-delay", "0")
	replica = StartWith(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	WaitReplicas(t, master, 1)
	return master, replica
}

// WaitReplicas waits until master has n replicas online.
func WaitReplicas(t testing.TB, master *Server, n int) {
	t.Helper()
	poll(t, 20*time.Second, fmt.Sprintf("%d replicas online at %s", n, master.Addr()), func() (bool, string) {
		info, err := info(master.Addr(), "replication")
		if err != nil {
			return false, err.Error()
		}
		return strings.Count(info, "state=online") == n, info
	})
}

// acceptsWrite writes a key of its own at the node at addr, directly (not
// following a Cluster's redirection).
func acceptsWrite(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }() // a probe
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Set(ctx, "redistest:probe", "1", time.Minute).Err()
}

// info is INFO section of the node at addr.
func info(addr, section string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }() // a probe
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Info(ctx, section).Result()
}

// poll calls cond every 50 ms until it holds, and fails the test with
// what cond said last when it has not held within.
func poll(t testing.TB, within time.Duration, what string, cond func() (ok bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last: %s", within, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterNodeTimeout is the replicated Cluster's node timeout: a master
// silent this long is failed over. Short, so a failover takes a few
// seconds; long enough that a loaded machine does not fail a live master
// over.
const clusterNodeTimeout = 2000 * time.Millisecond

// Cluster is three masters with one replica each.
type Cluster struct {
	t     testing.TB
	Nodes []*Server
}

// StartReplicatedCluster starts six cluster-mode nodes and joins them with
// redis-cli --cluster create --cluster-replicas 1, and returns once every
// node reports cluster_state:ok and every replica is in sync.
func StartReplicatedCluster(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not on PATH: install it (Debian: apt-get install redis-server); .ci/run does")
	}
	c := &Cluster{t: t}
	var addrs []string
	for range 6 {
		s := startClusterNode(t, clusterNodeTimeout)
		c.Nodes = append(c.Nodes, s)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	poll(t, 30*time.Second, "the cluster ok on every node, three masters each with a replica in sync", func() (bool, string) {
		for _, n := range c.Nodes {
			ci, err := clusterInfo(n.Addr())
			if err != nil {
				return false, err.Error()
			}
			if !strings.Contains(ci, "cluster_state:ok") {
				return false, n.Addr() + ": " + ci
			}
		}
		for _, n := range c.Nodes {
			in, err := info(n.Addr(), "replication")
			if err != nil {
				return false, err.Error()
			}
			if strings.Contains(in, "role:master") && !strings.Contains(in, "state=online") {
				return false, n.Addr() + ": " + in
			}
		}
		return true, ""
	})
	return c
}

// StoreURLs is the nodes as the store redis URLs (a Cluster's seeds).
func (c *Cluster) StoreURLs() string {
	var urls []string
	for _, n := range c.Nodes {
		urls = append(urls, n.URL())
	}
	return strings.Join(urls, " ")
}

// MasterOf is the master that serves key's slot now, as the first live
// node sees it.
func (c *Cluster) MasterOf(key string) *Server {
	c.t.Helper()
	slot, owner, err := c.owner(key, nil)
	if err != nil {
		c.t.Fatalf("the master of %q: %v", key, err)
	}
	s := c.node(owner)
	if s == nil {
		c.t.Fatalf("slot %d is served by %s, not a node of the cluster", slot, owner)
	}
	return s
}

// KillMaster SIGKILLs the master that serves key's slot, and returns it.
func (c *Cluster) KillMaster(key string) *Server {
	c.t.Helper()
	m := c.MasterOf(key)
	m.Stop()
	return m
}

// WaitFailover waits, up to within, until key's slot is served by a node
// other than old, every live node reports cluster_state:ok, and the new
// owner accepts a write to the slot; it returns the new owner.
func (c *Cluster) WaitFailover(key string, old *Server, within time.Duration) *Server {
	c.t.Helper()
	var promoted *Server
	poll(c.t, within, "a new master for "+key+"'s slot after "+old.Addr()+" died", func() (bool, string) {
		slot, owner, err := c.owner(key, old)
		if err != nil {
			return false, err.Error()
		}
		if owner == old.Addr() {
			return false, fmt.Sprintf("slot %d still served by %s", slot, owner)
		}
		promoted = c.node(owner)
		if promoted == nil {
			return false, fmt.Sprintf("slot %d served by %s, not a node of the cluster", slot, owner)
		}
		for _, n := range c.Nodes {
			if n == old {
				continue
			}
			ci, err := clusterInfo(n.Addr())
			if err != nil {
				return false, err.Error()
			}
			if !strings.Contains(ci, "cluster_state:ok") {
				return false, n.Addr() + ": " + ci
			}
		}
		// The write goes straight to the owner: a MOVED would be an error.
		cl := redis.NewClient(&redis.Options{Addr: owner, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
		defer func() { _ = cl.Close() }() // a probe
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := cl.Set(ctx, key, "redistest-probe", time.Minute).Err(); err != nil {
			return false, owner + ": " + err.Error()
		}
		return true, ""
	})
	return promoted
}

// Rejoin restarts old, a master killed and failed over, as an operator or
// an orchestrator would, and waits until it serves again as an online
// replica of promoted: it comes back empty (no persistence), finds in its
// nodes.conf that promoted took its slots, and syncs from it. Until then
// promoted has no replica.
func (c *Cluster) Rejoin(old, promoted *Server, within time.Duration) {
	c.t.Helper()
	old.Restart()
	poll(c.t, within, old.Addr()+" back as a replica of "+promoted.Addr(), func() (bool, string) {
		in, err := info(promoted.Addr(), "replication")
		if err != nil {
			return false, err.Error()
		}
		if !strings.Contains(in, "port="+strconv.Itoa(old.Port)+",state=online") {
			return false, in
		}
		return true, ""
	})
}

// owner is key's slot and the address of the master serving it, as the
// first live node other than skip reports (CLUSTER KEYSLOT, CLUSTER
// SHARDS).
func (c *Cluster) owner(key string, skip *Server) (int64, string, error) {
	for _, n := range c.Nodes {
		if n == skip || n.cmd == nil {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr(), DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		var shards []redis.ClusterShard
		if err == nil {
			shards, err = cl.ClusterShards(ctx).Result()
		}
		cancel()
		_ = cl.Close() // a probe
		if err != nil {
			return 0, "", fmt.Errorf("%s: %w", n.Addr(), err)
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start > slot || slot > r.End {
					continue
				}
				for _, node := range sh.Nodes {
					if node.Role == "master" && node.Health == "online" {
						return slot, net.JoinHostPort(node.IP, strconv.FormatInt(node.Port, 10)), nil
					}
				}
			}
		}
		return slot, "", fmt.Errorf("%s: no node serves slot %d", n.Addr(), slot)
	}
	return 0, "", fmt.Errorf("no live node")
}

// node is the cluster's node at addr, or nil.
func (c *Cluster) node(addr string) *Server {
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// clusterInfo is CLUSTER INFO of the node at addr.
func clusterInfo(addr string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }() // a probe
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.ClusterInfo(ctx).Result()
}
