// Package store opens hookgate's state store, the embedded bbolt file or
// Redis, and hands out what lives in it: the dedupe and freshness state,
// the sender's queue and the breakers the sender's instances share.
//
// A Conn is one open store. Lazy is the state as the handlers use it: it
// opens the store on first use, not before, and records each operation's
// latency.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/internal/boltfile"
	"github.com/hookgate/hookgate/internal/replicas"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/sender/destinations"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// Config selects the store.
type Config struct {
	// Backend is "file" (the embedded bbolt store) or "redis".
	Backend string
	// Dir is the file backend's directory, created if missing; the file
	// StateFile lives in it.
	Dir string
	// URLs are the Redis URLs, their placeholders already resolved: one is
	// a single node; several are a Cluster's seeds, or Sentinels when
	// SentinelMaster is set.
	URLs           []string
	SentinelMaster string
	// MinReplicas is the number of replicas each write that an answer
	// depends on waits for (WAIT), within ReplicaTimeout
	// (replicas.DefaultTimeout when 0): min_replicas. 0 waits for none.
	MinReplicas    int
	ReplicaTimeout time.Duration
}

// Check reports what c lacks, or holds in excess, for its backend.
func (c Config) Check() error {
	switch c.Backend {
	case "file":
		if len(c.URLs) > 0 || c.SentinelMaster != "" {
			return errors.New("store file takes a directory, not Redis URLs")
		}
		if c.MinReplicas != 0 {
			return errors.New("min_replicas is a Redis store's: the embedded store has no replicas (its commits are synced to disk)")
		}
	case "redis":
		if len(c.URLs) == 0 {
			return errors.New("store redis needs at least one URL")
		}
		if c.MinReplicas < 0 || c.ReplicaTimeout < 0 {
			return errors.New("store redis: min_replicas wants a number of replicas, 0 or more, and a positive timeout")
		}
		if c.ReplicaTimeout > replicas.MaxTimeout {
			return fmt.Errorf("store redis: min_replicas timeout %s: at most %s, since a Redis call waits %s for its answer",
				c.ReplicaTimeout, replicas.MaxTimeout, readTimeout)
		}
		_, err := RedisOptions(c.URLs, c.SentinelMaster)
		return err
	default:
		return fmt.Errorf("unknown store backend %q (want file or redis)", c.Backend)
	}
	return nil
}

// State is what the store holds for the receiver: dedupe and freshness,
// and the values kept once and for good (the secrets a handshake learns).
type State interface {
	dedupe.Store
	freshness.EntityStore
	// Keep stores value under key unless one is kept there already, and
	// returns the one kept: the first writer's, for good.
	Keep(ctx context.Context, key string, value []byte) ([]byte, error)
	// Kept returns the value kept under key, nil when there is none.
	Kept(ctx context.Context, key string) ([]byte, error)
}

// Conn is an open store. On Redis, what it hands out takes a key prefix:
// configs that share a Redis but not a prefix share the Conn.
type Conn struct {
	logger *slog.Logger

	db   *bolt.DB
	bolt *boltstore.Store

	rdb       redis.UniversalClient
	repl      *replicas.Waiter // nil: min_replicas 0
	stopCheck context.CancelFunc
}

// Open opens the store. A bbolt file is checked first (in a child
// process) and its lock taken; a Redis client is made, and whether Redis
// answers is logged, with a warning now and a line when it answers later.
func Open(cfg Config, logger *slog.Logger) (*Conn, error) {
	c := &Conn{logger: logger}
	switch cfg.Backend {
	case "file":
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("store file: %w", err)
		}
		path := filepath.Join(cfg.Dir, StateFile)
		db, err := OpenStateFile(path, 5*time.Second, 0, false)
		if err != nil {
			return nil, err
		}
		s, err := boltstore.New(db, boltstore.Options{Logger: logger})
		if err != nil {
			_ = db.Close() // the error reported is New's
			return nil, fmt.Errorf("store file %s: %w", path, err)
		}
		logger.Info("store: the embedded file", "backend", "file", "path", path, "answered", true)
		c.db, c.bolt = db, s
	case "redis":
		opts, err := RedisOptions(cfg.URLs, cfg.SentinelMaster)
		if err != nil {
			return nil, err
		}
		c.rdb = redis.NewUniversalClient(opts)
		if cfg.MinReplicas > 0 {
			c.repl = replicas.New(c.rdb, cfg.MinReplicas, cfg.ReplicaTimeout, logger)
		}
		if cc, ok := c.rdb.(*redis.ClusterClient); ok {
			sendScriptsOnce(cc)
			reloadOnNodeFailure(cc)
		}
		out := newOutage(logger, opts.Addrs, time.Now)
		out.watch(c.rdb)
		ctx, stop := context.WithCancel(context.Background())
		c.stopCheck = stop
		go checkRedis(ctx, c.rdb, opts.Addrs, logger, out)
	default:
		return nil, fmt.Errorf("unknown store backend %q (want file or redis)", cfg.Backend)
	}
	return c, nil
}

// State is the dedupe and freshness state; prefix starts its Redis keys.
func (c *Conn) State(prefix string) State {
	if c.bolt != nil {
		return c.bolt
	}
	s := redisstore.New(c.rdb, prefix)
	if c.repl != nil {
		s.WaitForReplicas(c.repl)
	}
	return s
}

// ReplicationShortfalls counts, by operation, the writes that fewer
// replicas than min_replicas acknowledged in time (replicas.Ops' names,
// 0 included): nil without min_replicas.
func (c *Conn) ReplicationShortfalls() map[string]int64 {
	if c.repl == nil {
		return nil
	}
	return c.repl.Counts()
}

// Queue opens the sender's queue on the store, prefix starting its Redis
// keys, keeping dead letters for retention and what settled as h says.
// A store whose queue is in another layout than this version's is
// refused (boltqueue.ErrLayout, redisqueue.ErrLayout). On a Redis that
// does not answer at start, the queue checks before its first write.
func (c *Conn) Queue(prefix string, retention time.Duration, h sender.History) (sender.AuditedQueue, error) {
	if c.db != nil {
		q, err := boltqueue.New(c.db, retention)
		if err != nil {
			return nil, err
		}
		q.KeepHistory(h)
		return q, nil
	}
	q := redisqueue.New(c.rdb, prefix, retention)
	q.KeepHistory(h)
	if c.repl != nil {
		q.WaitForReplicas(c.repl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := q.CheckLayout(ctx); errors.Is(err, redisqueue.ErrLayout) {
		return nil, err
	}
	return q, nil
}

// Breakers shares the sender's breakers between instances on Redis; nil
// keeps them in the process.
func (c *Conn) Breakers(prefix string) sender.Remote {
	if c.rdb == nil {
		return nil
	}
	return redisqueue.NewBreakers(c.rdb, prefix)
}

// Destinations keeps the destinations made through the admin API, beside
// the queue, prefix starting their Redis keys.
func (c *Conn) Destinations(prefix string) destinations.Backend {
	if c.db != nil {
		return destinations.NewBolt(c.db)
	}
	return destinations.NewRedis(c.rdb, prefix).WaitForReplicas(c.repl)
}

// Close closes the store. Its name makes a Conn a caddy.Destructor.
func (c *Conn) Destruct() error {
	if c.db != nil {
		return errors.Join(c.bolt.Close(), c.db.Close())
	}
	c.stopCheck()
	return c.rdb.Close()
}

// checkRedis logs whether Redis answers (a warning when it does not:
// requests get 503 until it does), then checks its eviction policy; when
// Redis is down at start, once it answers. A connection refused is out's
// to log; checkRedis warns of a Redis that takes connections but fails
// the ping (a wrong password).
func checkRedis(ctx context.Context, rdb redis.UniversalClient, addrs []string, logger *slog.Logger, out *outage) {
	ping := func() error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err()
	}
	if err := ping(); err != nil {
		warned := !out.isDown()
		if warned {
			logger.Warn("store: Redis does not answer at start; until it does, webhooks get 503 store_unavailable and the sender waits",
				"backend", "redis", "addrs", addrs, "answered", false, "error", err)
		}
		for wait := time.Second; ping() != nil; wait = min(2*wait, time.Minute) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		if warned {
			logger.Info("store: Redis answers now", "backend", "redis", "addrs", addrs, "answered", true)
		}
	} else {
		logger.Info("store: Redis", "backend", "redis", "addrs", addrs, "answered", true)
	}
	checkEvictionPolicy(ctx, rdb, logger)
}

// checkEvictionPolicy logs a warning unless every Redis master evicts
// nothing. Every hookgate key has a TTL, so the volatile-* policies evict
// exactly hookgate's records, and allkeys-* as readily: a record evicted is
// a duplicate forwarded again.
func checkEvictionPolicy(ctx context.Context, rdb redis.UniversalClient, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	check := func(ctx context.Context, c *redis.Client) error {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return err
		}
		if policy := v["maxmemory-policy"]; policy != "noeviction" {
			logger.Warn("Redis evicts keys under memory pressure: every hookgate key has a TTL, so an evicted dedupe record lets its duplicates through to the upstream again; set maxmemory-policy noeviction",
				"redis", c.Options().Addr, "maxmemory-policy", policy)
		}
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	}
	if err != nil {
		logger.Warn("could not check Redis maxmemory-policy; make sure it is noeviction, or evicted dedupe records let duplicates through",
			"error", err)
	}
}

// StateFile is the embedded store's file name in its directory.
const StateFile = "state.db"

// CheckStateFile checks the embedded store's file at path as a start
// does, within limit (0: by its size), but read-only and waiting at most
// a second for its lock; its errors name the file and the remedy.
func CheckStateFile(path string, limit time.Duration) error {
	db, err := OpenStateFile(path, time.Second, limit, true)
	if err != nil {
		return err
	}
	return db.Close()
}

// OpenStateFile checks the embedded store's file in a child process
// (boltfile.CheckInChild, within limit; 0: by its size), then opens it,
// with errors that name the file and the remedy.
func OpenStateFile(path string, timeout, limit time.Duration, readOnly bool) (*bolt.DB, error) {
	err := boltfile.CheckInChild(path, timeout, limit)
	var db *bolt.DB
	if err == nil {
		db, err = boltfile.OpenFile(path, timeout, readOnly, false)
	}
	switch {
	case errors.Is(err, boltfile.ErrLocked) && readOnly: // a check
		return nil, fmt.Errorf("store file %s is held by a running gateway (its lock): a check reads a stopped gateway's file. "+
			"To check a running one's, back it up and check the copy: `hookgate store backup <file>` (it checks the copy too)", path)
	case errors.Is(err, boltfile.ErrLocked):
		return nil, fmt.Errorf("store file %s: still locked after %s: is another hookgate using it? Stop it, or give this one its own store directory", path, timeout)
	case errors.Is(err, boltfile.ErrCorrupt):
		return nil, fmt.Errorf("store file %s is corrupt (%v). "+
			"Stop hookgate and move the file aside, or restore it from a backup: a fresh file starts empty, "+
			"so duplicates of deliveries recorded in it are forwarded again, and the sender's events queued in it are not sent; "+
			"`hookgate store check %s` checks a file", path, err, path)
	case err != nil:
		return nil, fmt.Errorf("store file %s: %w", path, err)
	}
	return db, nil
}

// RedisOptions turns Redis URLs into go-redis options: one URL is a single
// node, several are a Cluster's seeds, or Sentinels with a master name.
// Credentials, database and TLS come from the first URL. Errors name a
// URL only with its credentials redacted.
func RedisOptions(urls []string, sentinelMaster string) (*redis.UniversalOptions, error) {
	var opts redis.UniversalOptions
	for i, raw := range urls {
		// url.Parse's own errors quote the whole URL.
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("store redis: URL %d does not parse (is a special character in the password not %%-escaped?)", i+1)
		}
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("store redis: URL %d (%s) is not a Redis URL: %s", i+1, redactedURL(u), redact(err.Error(), raw, u))
		}
		if i == 0 {
			opts.Username, opts.Password, opts.DB, opts.TLSConfig = o.Username, o.Password, o.DB, o.TLSConfig
		}
		opts.Addrs = append(opts.Addrs, o.Addr)
	}
	opts.MasterName = sentinelMaster
	opts.IsClusterMode = len(opts.Addrs) > 1 && sentinelMaster == ""
	// Fail fast when Redis is away: requests fail closed with 503 rather
	// than hang, and the client reconnects by itself when Redis is back.
	opts.DialTimeout = 2 * time.Second
	opts.ReadTimeout = readTimeout
	opts.WriteTimeout = 2 * time.Second
	// Nothing is sent twice. go-redis resends a command whose reply timed
	// out or whose connection broke after it was written, and a script
	// that ran but answered late would run again: a Lease run twice
	// strands the first run's envelopes, unseen, until their lease
	// expires. Without a retry the call fails, and its caller (the
	// sender's worker loop, a webhook's sender) counts the error and
	// tries again. The retry buys little besides: a pooled connection that
	// Redis closed (a restart, a failover) is found and dropped before
	// use (the pool's health check), and a dial error fails before
	// anything is sent.
	opts.MaxRetries = -1
	return &opts, nil
}

// readTimeout is how long a Redis call waits for its answer.
const readTimeout = 2 * time.Second

// redactedURL shows u without what may be a credential: the user info
// (a password, or a token given as the user name) and the query (where a
// password option may sit).
func redactedURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if u.User != nil {
		r.User = url.User("xxxxx")
	}
	s := r.String()
	if u.RawQuery != "" {
		s += "?…"
	}
	return s
}

// redact removes from msg the raw URL and every credential it holds, the
// longest first, so that a short one inside a longer one leaves no part
// of the longer behind.
func redact(msg, raw string, u *url.URL) string {
	msg = strings.ReplaceAll(msg, raw, redactedURL(u))
	var secrets []string
	if u.User != nil {
		p, _ := u.User.Password()
		secrets = append(secrets, p, u.User.Username())
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if len(v) >= 4 {
				secrets = append(secrets, v)
			}
		}
	}
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, secret := range secrets {
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "xxxxx")
		}
	}
	return msg
}
