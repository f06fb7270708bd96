package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// connections holds the open Redis clients and bbolt files, keyed by their
// config, so a config reload (which provisions the new config before the
// old one is cleaned up) reuses them instead of opening them twice.
var connections = caddy.NewUsagePool()

// boltConn is an open bbolt file and the store on it.
type boltConn struct {
	db    *bolt.DB
	store *boltstore.Store
}

func (c *boltConn) Destruct() error {
	c.store.Close()
	return c.db.Close()
}

// redisConn is an open Redis client, and the start-up check of it.
type redisConn struct {
	rdb       redis.UniversalClient
	stopCheck context.CancelFunc
}

func (c *redisConn) Destruct() error {
	c.stopCheck()
	return c.rdb.Close()
}

// opened is the app's open store: the dedupe and freshness backend, and
// the sender's queue on the same connection.
type opened struct {
	backend backend
	queue   func(retention time.Duration) (sender.AuditedQueue, error)
	// breakers shares the sender's breakers between instances (Redis);
	// nil keeps them in the process.
	breakers sender.Remote
}

// openStore opens (or reuses) the configured store. The returned key
// releases it in the usage pool.
func (a *App) openStore(logger *zap.Logger) (opened, string, error) {
	cfg, _ := json.Marshal(a.Store)
	poolKey := string(cfg)
	switch a.Store.Backend {
	case "file":
		v, _, err := connections.LoadOrNew(poolKey, func() (caddy.Destructor, error) {
			if err := os.MkdirAll(a.Store.Dir, 0o700); err != nil {
				return nil, fmt.Errorf("store file: %w", err)
			}
			path := filepath.Join(a.Store.Dir, StateFile)
			db, err := openStateFile(path, 5*time.Second, 0, false)
			if err != nil {
				return nil, err
			}
			s, err := boltstore.New(db, boltstore.Options{Logger: zapslogLogger(logger)})
			if err != nil {
				db.Close()
				return nil, fmt.Errorf("store file %s: %w", path, err)
			}
			logger.Info("store: the embedded file", zap.String("backend", "file"), zap.String("path", path), zap.Bool("answered", true))
			return &boltConn{db: db, store: s}, nil
		})
		if err != nil {
			return opened{}, "", err
		}
		c := v.(*boltConn)
		return opened{backend: c.store, queue: func(retention time.Duration) (sender.AuditedQueue, error) {
			return boltqueue.New(c.db, retention)
		}}, poolKey, nil
	case "redis":
		setRedisLogger.Do(func() { redis.SetLogger(redisLogger{}) })
		v, _, err := connections.LoadOrNew(poolKey, func() (caddy.Destructor, error) {
			opts, err := redisOptions(a.Store)
			if err != nil {
				return nil, err
			}
			rdb := redis.NewUniversalClient(opts)
			ctx, stop := context.WithCancel(context.Background())
			go checkRedis(ctx, rdb, redisAddrs(a.Store), logger)
			return &redisConn{rdb: rdb, stopCheck: stop}, nil
		})
		if err != nil {
			return opened{}, "", err
		}
		rdb := v.(*redisConn).rdb
		return opened{backend: redisstore.New(rdb, a.KeyPrefix), queue: func(retention time.Duration) (sender.AuditedQueue, error) {
			q := redisqueue.New(rdb, a.KeyPrefix, retention)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if n, err := q.Upgrade(ctx); err != nil {
				logger.Warn("could not move the sender's envelopes of an earlier version to the current layout: they wait, undelivered, until a start that can", zap.Error(err))
			} else if n > 0 {
				logger.Info("moved the sender's envelopes of an earlier version to the current layout", zap.Int("envelopes", n))
			}
			return q, nil
		}, breakers: redisqueue.NewBreakers(rdb, a.KeyPrefix)}, poolKey, nil
	}
	return opened{}, "", fmt.Errorf("unknown store backend %q", a.Store.Backend)
}

// redisAddrs lists the store's Redis addresses, without credentials.
func redisAddrs(sc *StoreConfig) []string {
	opts, err := redisOptions(sc)
	if err != nil {
		return nil
	}
	return opts.Addrs
}

// checkRedis logs, once a Redis client is made, whether Redis answers (a
// warning when it does not: requests get 503 until it does), then checks
// its eviction policy; when Redis is down at start, once it answers.
func checkRedis(ctx context.Context, rdb redis.UniversalClient, addrs []string, logger *zap.Logger) {
	ping := func() error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err()
	}
	if err := ping(); err != nil {
		logger.Warn("store: Redis does not answer at start; until it does, webhooks get 503 store_unavailable and the sender waits",
			zap.String("backend", "redis"), zap.Strings("addrs", addrs), zap.Bool("answered", false), zap.Error(err))
		for wait := time.Second; ping() != nil; wait = min(2*wait, time.Minute) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		logger.Info("store: Redis answers now", zap.String("backend", "redis"), zap.Strings("addrs", addrs), zap.Bool("answered", true))
	} else {
		logger.Info("store: Redis", zap.String("backend", "redis"), zap.Strings("addrs", addrs), zap.Bool("answered", true))
	}
	checkEvictionPolicy(ctx, rdb, logger)
}

// checkEvictionPolicy logs a warning unless every Redis master evicts
// nothing. Every hookgate key has a TTL, so the volatile-* policies evict
// exactly hookgate's records, and allkeys-* as readily: a record evicted is
// a duplicate forwarded again.
func checkEvictionPolicy(ctx context.Context, rdb redis.UniversalClient, logger *zap.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	check := func(ctx context.Context, c *redis.Client) error {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return err
		}
		if policy := v["maxmemory-policy"]; policy != "noeviction" {
			logger.Warn("Redis evicts keys under memory pressure: every hookgate key has a TTL, so an evicted dedupe record lets its duplicates through to the upstream again; set maxmemory-policy noeviction",
				zap.String("redis", c.Options().Addr), zap.String("maxmemory-policy", policy))
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
			zap.Error(err))
	}
}

// StateFile is the embedded store's file name in its directory.
const StateFile = "state.db"

// CheckStateFile checks the embedded store's file at path as a start
// does, within limit (0: by its size), but read-only and waiting at most
// a second for its lock; its errors name the file and the remedy.
func CheckStateFile(path string, limit time.Duration) error {
	db, err := openStateFile(path, time.Second, limit, true)
	if err != nil {
		return err
	}
	return db.Close()
}

// openStateFile checks the embedded store's file (checkStateFile, within
// limit; 0: by its size), then opens it, with errors that name the file
// and the remedy.
func openStateFile(path string, timeout, limit time.Duration, readOnly bool) (*bolt.DB, error) {
	err := checkStateFile(path, timeout, limit)
	var db *bolt.DB
	if err == nil {
		db, err = boltstore.OpenFile(path, timeout, readOnly, false)
	}
	switch {
	case errors.Is(err, boltstore.ErrLocked):
		return nil, fmt.Errorf("store file %s: still locked after %s: is another hookgate using it? Stop it, or give this one its own store directory", path, timeout)
	case errors.Is(err, boltstore.ErrCorrupt):
		return nil, fmt.Errorf("store file %s is corrupt (%v). "+
			"Stop hookgate and move the file aside, or restore it from a backup: a fresh file starts empty, "+
			"so duplicates of deliveries recorded in it are forwarded again, and the sender's events queued in it are not sent; "+
			"`hookgate store check %s` checks a file", path, err, path)
	case err != nil:
		return nil, fmt.Errorf("store file %s: %w", path, err)
	}
	return db, nil
}

// The store check's child: checkStateFile runs this very binary again with
// checkChildEnv set to "<lock timeout>,<limit>,<path>". Any binary that
// links this package (hookgate, a Caddy built with xcaddy, a program of
// yours, a test binary) runs the check in init, before its own main, and
// exits with one of these codes.
const (
	checkChildEnv    = "HOOKGATE_STORE_CHECK_CHILD"
	checkExitLocked  = 3
	checkExitCorrupt = 4
	checkExitTimeout = 5
)

func init() {
	if v, ok := os.LookupEnv(checkChildEnv); ok {
		checkChild(v) // exits
	}
}

// checkChild checks the file that checkStateFile named, and exits 0 when
// it is sound, checkExitLocked or checkExitCorrupt, or 1, with the error
// on stderr; checkExitTimeout when the check, its lock wait aside, takes
// longer than its limit.
func checkChild(v string) {
	parts := strings.SplitN(v, ",", 3)
	var lockTimeout, limit time.Duration
	var err error
	if len(parts) == 3 {
		if lockTimeout, err = time.ParseDuration(parts[0]); err == nil {
			limit, err = time.ParseDuration(parts[1])
		}
	}
	if len(parts) != 3 || err != nil {
		fmt.Fprintf(os.Stderr, "%s: want <lock timeout>,<limit>,<path>\n", checkChildEnv)
		os.Exit(1)
	}
	time.AfterFunc(lockTimeout+limit, func() { os.Exit(checkExitTimeout) })
	err = checkStateFileHere(parts[2], lockTimeout)
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, err)
	switch {
	case errors.Is(err, boltstore.ErrLocked):
		os.Exit(checkExitLocked)
	case errors.Is(err, boltstore.ErrCorrupt):
		os.Exit(checkExitCorrupt)
	}
	os.Exit(1)
}

// checkStateFile runs bbolt's consistency check of the file at path, if
// there is one, in a child process (checkChild): some damage makes bbolt's
// check fault on a goroutine of its own, where no recover reaches, or loop
// for ever. In the child, either ends the child: a crash, or a check not
// done within limit (0: a minute, and 30s per GiB), is ErrCorrupt.
func checkStateFile(path string, lockTimeout, limit time.Duration) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return nil // a new store (bbolt initialises an empty file)
	}
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return checkStateFileHere(path, lockTimeout)
	}
	if limit <= 0 {
		limit = time.Minute + time.Duration(fi.Size()>>30)*30*time.Second
	}
	// The child stops itself at the limit (a parent killed meanwhile
	// leaves no check running); the parent kills it a little later.
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout+limit+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), checkChildEnv+"="+lockTimeout.String()+","+limit.String()+","+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil, errors.As(err, &exit) && exit.ExitCode() == checkExitTimeout:
		return fmt.Errorf("%w: its check did not finish within %s: damaged pages that lead back to each other, "+
			"or a disk too slow for the limit (`hookgate store check --timeout <longer>` tells them apart)", boltstore.ErrCorrupt, limit)
	case !errors.As(err, &exit):
		// The check could not run in a child (the binary is gone, exec is
		// not allowed): check here.
		return checkStateFileHere(path, lockTimeout)
	case exit.ExitCode() == checkExitLocked:
		return fmt.Errorf("%w: %s", boltstore.ErrLocked, msg)
	case exit.ExitCode() == checkExitCorrupt:
		return fmt.Errorf("%w: %s", boltstore.ErrCorrupt, strings.TrimPrefix(msg, boltstore.ErrCorrupt.Error()+": "))
	case exit.ExitCode() == 1:
		return errors.New(msg)
	}
	// Killed by a fault reading a damaged page: name it, not the dump.
	why := "it crashed"
	for line := range strings.Lines(msg) {
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "unexpected fault") {
			why += ": " + strings.TrimSpace(line)
			break
		}
	}
	return fmt.Errorf("%w: its check read a damaged page and %s", boltstore.ErrCorrupt, why)
}

// checkStateFileHere checks the file in this process.
func checkStateFileHere(path string, lockTimeout time.Duration) error {
	db, err := boltstore.OpenFile(path, lockTimeout, true, true)
	if err != nil {
		return err
	}
	return db.Close()
}

// redisOptions turns the store URLs into go-redis options: one URL is a
// single node, several are a Cluster's seeds, or Sentinels with a master
// name. Credentials, database and TLS come from the first URL.
func redisOptions(sc *StoreConfig) (*redis.UniversalOptions, error) {
	var opts redis.UniversalOptions
	repl := caddy.NewReplacer()
	for i, tmpl := range sc.URLs {
		// {env.*} and {file.*} are read now, so a password never appears
		// in the adapted config.
		raw, err := repl.ReplaceOrErr(tmpl, true, true)
		if err != nil {
			return nil, fmt.Errorf("store redis: URL %d: %v", i+1, err)
		}
		// Errors name the URL only with its password redacted: url.Parse's
		// own errors quote the whole URL.
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
	opts.MasterName = sc.SentinelMaster
	opts.IsClusterMode = len(opts.Addrs) > 1 && sc.SentinelMaster == ""
	// Fail fast when Redis is away: requests fail closed with 503 rather
	// than hang, and the client reconnects by itself when Redis is back.
	opts.DialTimeout = 2 * time.Second
	opts.ReadTimeout = 2 * time.Second
	opts.WriteTimeout = 2 * time.Second
	opts.MaxRetries = 1
	return &opts, nil
}

// redactedURL shows u without what may be a credential: the user info
// (a password, or a token given as the user name) and the query (where a
// password option may sit). It is for errors and logs.
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

// redact removes from msg the raw URL and every credential it holds.
func redact(msg, raw string, u *url.URL) string {
	msg = strings.ReplaceAll(msg, raw, redactedURL(u))
	if u.User != nil {
		p, _ := u.User.Password()
		for _, secret := range []string{p, u.User.Username()} {
			if secret != "" {
				msg = strings.ReplaceAll(msg, secret, "xxxxx")
			}
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if len(v) >= 4 {
				msg = strings.ReplaceAll(msg, v, "xxxxx")
			}
		}
	}
	return msg
}

// redisLogger sends go-redis's own log lines through Caddy's logger, as
// JSON like every other line, instead of plain text on stderr.
type redisLogger struct{}

func (redisLogger) Printf(_ context.Context, format string, v ...any) {
	caddy.Log().Named("redis").Warn(fmt.Sprintf(format, v...))
}

var setRedisLogger sync.Once

// zapslogLogger adapts Caddy's zap logger for the domain packages' slog,
// so that a line reads as one of l's own: under l's name, and without the
// stack trace zapslog adds to every error by default (Caddy's logs carry
// none unless configured to).
func zapslogLogger(l *zap.Logger) *slog.Logger {
	return slog.New(zapslog.NewHandler(l.Core(), zapslog.WithName(l.Name()), zapslog.AddStacktraceAt(slog.Level(math.MaxInt))))
}

// instrumentedStore records each store operation's latency.
type instrumentedStore struct {
	backend
	duration metric.Float64Histogram
	attrs    map[string][]metric.RecordOption // by operation, built once (a slice, so Record's variadic argument is not one more allocation)
}

func newInstrumentedStore(s backend, name string, duration metric.Float64Histogram) instrumentedStore {
	is := instrumentedStore{backend: s, duration: duration, attrs: map[string][]metric.RecordOption{}}
	for _, op := range []string{"claim", "record", "release", "get", "acquire_entity", "finish_entity"} {
		is.attrs[op] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("backend", name), attribute.String("op", op)))}
	}
	return is
}

func (s instrumentedStore) observe(ctx context.Context, op string, start time.Time) {
	s.duration.Record(ctx, time.Since(start).Seconds(), s.attrs[op]...)
}

func (s instrumentedStore) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	defer s.observe(ctx, "claim", time.Now())
	return s.backend.Claim(ctx, key, c)
}

func (s instrumentedStore) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	defer s.observe(ctx, "record", time.Now())
	return s.backend.Record(ctx, key, token, rec, retention, now)
}

func (s instrumentedStore) Release(ctx context.Context, key, token string) error {
	defer s.observe(ctx, "release", time.Now())
	return s.backend.Release(ctx, key, token)
}

func (s instrumentedStore) Get(ctx context.Context, key string, now time.Time) (dedupe.Entry, error) {
	defer s.observe(ctx, "get", time.Now())
	return s.backend.Get(ctx, key, now)
}

func (s instrumentedStore) AcquireEntity(ctx context.Context, entity string, a dedupe.Acquire) (dedupe.AcquireResult, error) {
	defer s.observe(ctx, "acquire_entity", time.Now())
	return s.backend.AcquireEntity(ctx, entity, a)
}

func (s instrumentedStore) FinishEntity(ctx context.Context, entity, token string, f dedupe.Finish) error {
	defer s.observe(ctx, "finish_entity", time.Now())
	return s.backend.FinishEntity(ctx, entity, token, f)
}
