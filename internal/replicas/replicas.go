// Package replicas makes a Redis write wait for its replicas before
// hookgate answers on it: the store's min_replicas.
//
// Redis replicates asynchronously: a master that dies takes with it the
// writes it acknowledged but had not yet sent, and the replica promoted in
// its place never saw them. WAIT <n> <timeout> blocks until n replicas
// have acknowledged every write the same connection made before it, or
// the timeout passes, and answers how many did. So a Waiter sends the
// write and WAIT in one pipeline, on one connection to the master that
// holds the write's key (on a Cluster, the slot's master), and reads
// both answers.
//
// WAIT is not consensus. A write that n replicas acknowledged survives
// the master's loss unless a replica that did not acknowledge it is
// promoted; Sentinel and the Cluster prefer the most up-to-date replica,
// which makes that rare, not impossible. And a write whose WAIT fell
// short is not undone: the master keeps it and may still replicate it.
package replicas

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout is how long a write waits for its replicas when
// min_replicas gives no timeout.
const DefaultTimeout = 100 * time.Millisecond

// MaxTimeout bounds the timeout: WAIT answers within it, and the call
// must have its answer within the client's read timeout (2 s), with room
// for the write itself. A WAIT cut by the read timeout would fail the
// call with a network error, and its connection with it.
const MaxTimeout = time.Second

// Op is a write that waits for replicas, named for the metric's op label.
// A refusing op fails when its replicas fall short: its caller has not
// answered yet, and answers 503 (the enqueue, the dedupe claim). The
// others are counted and logged: their answer was given, or their effect
// is done and a failure would mislead.
type Op struct {
	Name   string
	Refuse bool
}

// The ops that wait for replicas.
var (
	Enqueue   = Op{"enqueue", true}
	Claim     = Op{"claim", true}
	Record    = Op{"record", false}
	Release   = Op{"release", false}
	Watermark = Op{"watermark", false}
	Settle    = Op{"settle", false}
	Redrive   = Op{"redrive", false}
	Resend    = Op{"resend", false}
	Purge     = Op{"purge", false}
	// Destination is a change of a destination made through the admin
	// API: refused, so that an answered create survives a failover.
	Destination = Op{"destination", true}
)

// Ops are the ops, in the order Counts lists them.
var Ops = []Op{Enqueue, Claim, Record, Release, Watermark, Settle, Redrive, Resend, Purge, Destination}

// ErrShortfall is what a refusing op's error wraps when fewer replicas
// than required acknowledged it in time. The write may have happened on
// the master: its outcome is unknown, and a retry with the same ID is
// safe.
var ErrShortfall = errors.New("fewer Redis replicas than min_replicas acknowledged the write in time")

// Shortfall is a write's shortfall: Got of Want replicas acknowledged it.
type Shortfall struct {
	Op        string
	Want, Got int
}

func (s *Shortfall) Error() string {
	return fmt.Sprintf("%s: %d of %d replicas acknowledged the write in time (min_replicas): its outcome is unknown, a retry with the same ID is safe", s.Op, s.Got, s.Want)
}

// Is makes errors.Is(err, ErrShortfall) true.
func (s *Shortfall) Is(target error) bool { return target == ErrShortfall }

// Waiter sends writes that wait for replicas. Its methods are safe for
// concurrent use. A nil *Waiter waits for none: its Check finds no
// shortfall, and its Counts are 0.
type Waiter struct {
	rdb     redis.UniversalClient
	n       int
	timeout time.Duration
	logger  *slog.Logger
	now     func() time.Time

	counts []atomic.Int64 // shortfalls by op, in Ops' order
	mu     sync.Mutex
	logged []time.Time // when each op's shortfall was last logged
	since  []int64     // shortfalls of each op not logged since
}

// New returns a Waiter on rdb for n replicas (at least 1) within timeout
// (DefaultTimeout when 0). Shortfalls are logged on logger, at most one
// line per op every LogEvery.
func New(rdb redis.UniversalClient, n int, timeout time.Duration, logger *slog.Logger) *Waiter {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Waiter{rdb: rdb, n: n, timeout: timeout, logger: logger, now: time.Now,
		counts: make([]atomic.Int64, len(Ops)), logged: make([]time.Time, len(Ops)), since: make([]int64, len(Ops))}
}

// LogEvery bounds how often one op's shortfalls are logged: a replica
// that is down would otherwise log every request.
const LogEvery = 10 * time.Second

// WaitCmd is the WAIT command that follows a batch of writes on their
// connection.
func (w *Waiter) WaitCmd(ctx context.Context) *redis.IntCmd {
	return redis.NewIntCmd(ctx, "wait", w.n, w.timeout.Milliseconds())
}

// Do sends cmds, then WAIT, in one pipeline on the connection of the
// master that holds key. It returns the first command's error that is
// not redis.Nil; otherwise, for op, the shortfall (see Check).
func (w *Waiter) Do(ctx context.Context, op Op, key string, cmds ...redis.Cmder) error {
	acked, err := w.Send(ctx, key, cmds...)
	if err != nil {
		return err
	}
	return w.Check(op, acked)
}

// Fence waits until n replicas hold everything the master of key holds
// now, the writes of other connections included: WAIT covers only the
// writes its own connection made, so Fence makes one, a short-lived key
// in key's slot, and waits for it. It is for an answer that vouches for
// an earlier write it found in place: a duplicate enqueue answered 202
// must not stand on an envelope that a failover can still lose.
func (w *Waiter) Fence(ctx context.Context, op Op, key string) error {
	return w.Do(ctx, op, key, redis.NewStatusCmd(ctx, "set", fenceKey(key), "", "px", fenceTTL.Milliseconds()))
}

// fenceTTL is how long a fence key stays: one fence per slot is enough,
// and it goes by itself.
const fenceTTL = time.Minute

// fenceKey is a key in key's Cluster slot: key's hash tag kept, or key
// made the hash tag. key holds a hash tag or no brace at all (hookgate's
// queue keys hold one): a key with an empty tag or a stray brace would
// hash, wrapped, to another slot.
func fenceKey(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key + ":fence"
		}
	}
	return "{" + key + "}:fence"
}

// Send sends cmds and WAIT on key's master, and returns how many replicas
// acknowledged (0 when WAIT failed after the writes were answered), for
// a caller that judges the write by its answer: only a write that wrote
// is checked (Check).
func (w *Waiter) Send(ctx context.Context, key string, cmds ...redis.Cmder) (int, error) {
	node, err := w.node(ctx, key)
	if err != nil {
		return 0, err
	}
	wait := w.WaitCmd(ctx)
	pipe := node.Pipeline()
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd) // a pipeline only queues it
	}
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx) // each command holds its own error
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && err != redis.Nil {
			// MOVED or ASK: the slot moved (a failover) or is moving (a
			// resharding), and nothing ran. The Cluster client would
			// follow the redirect, but WAIT must go on the connection
			// that wrote: the call fails (503, a retry is safe), and the
			// slot map is reloaded for the next one. During a resharding,
			// the keys already moved out of a migrating slot fail so
			// until the slot's migration ends.
			if cc, ok := w.rdb.(*redis.ClusterClient); ok && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
				cc.ReloadState(ctx)
			}
			return 0, err
		}
	}
	return int(wait.Val()), nil
}

// node is the client whose connection takes a write of key: on a Cluster
// the slot's master (the Cluster client would spread a pipeline, and
// WAIT, over every shard), otherwise the client itself.
func (w *Waiter) node(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := w.rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return w.rdb, nil
}

// Run runs script as EVALSHA (loading it first when the master does not
// hold it), followed by WAIT on the same connection, and
// returns its answer. For a refusing op whose replicas fell short, the
// answer's error is the shortfall (its value was read: the script ran).
func (w *Waiter) Run(ctx context.Context, op Op, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd, acked := w.Eval(ctx, script, keys, args...)
	if cmd.Err() != nil && cmd.Err() != redis.Nil {
		return cmd
	}
	if err := w.Check(op, acked); err != nil {
		cmd.SetErr(err)
	}
	return cmd
}

// Eval runs script as Run does, and returns its answer and how many
// replicas acknowledged it, unjudged (see Send).
func (w *Waiter) Eval(ctx context.Context, script *redis.Script, keys []string, args ...any) (*redis.Cmd, int) {
	cmd := redis.NewCmd(ctx, evalArgs(script.Hash(), keys, args)...)
	acked, err := w.Send(ctx, keys[0], cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The master does not hold the script (restarted, promoted, or
		// SCRIPT FLUSH): NOSCRIPT ran nothing. Load it there, then again.
		node, nerr := w.node(ctx, keys[0])
		if nerr != nil {
			cmd.SetErr(nerr)
			return cmd, 0
		}
		if lerr := script.Load(ctx, node).Err(); lerr != nil {
			cmd.SetErr(lerr)
			return cmd, 0
		}
		cmd = redis.NewCmd(ctx, evalArgs(script.Hash(), keys, args)...)
		acked, err = w.Send(ctx, keys[0], cmd)
	}
	if err != nil && cmd.Err() == nil {
		cmd.SetErr(err) // the node was not found: cmd was not sent
	}
	return cmd, acked
}

// evalArgs are an EVALSHA's arguments.
func evalArgs(sha string, keys []string, args []any) []any {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "evalsha", sha, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, args...)
}

// Check judges a write that acked replicas acknowledged: nil when they
// are enough. A shortfall is counted and logged; for a refusing op it is
// also the error returned (a *Shortfall).
func (w *Waiter) Check(op Op, acked int) error {
	if w == nil || acked >= w.n {
		return nil
	}
	i := opIndex(op)
	w.counts[i].Add(1)
	w.log(i, op, acked)
	if op.Refuse {
		return &Shortfall{Op: op.Name, Want: w.n, Got: acked}
	}
	return nil
}

// log logs op's shortfall, unless one was logged within LogEvery: then it
// is counted into the next line.
func (w *Waiter) log(i int, op Op, acked int) {
	w.mu.Lock()
	now := w.now()
	w.since[i]++
	if !w.logged[i].IsZero() && now.Sub(w.logged[i]) < LogEvery {
		w.mu.Unlock()
		return
	}
	n := w.since[i]
	w.logged[i], w.since[i] = now, 0
	w.mu.Unlock()
	effect := "its answer was given; the write is on the master and may be lost if it fails now"
	if op.Refuse {
		effect = "answered 503 store_unavailable (a retry with the same ID is safe)"
	}
	w.logger.Warn("store: fewer Redis replicas than min_replicas acknowledged a write in time",
		"op", op.Name, "acknowledged", acked, "min_replicas", w.n, "timeout", w.timeout,
		"shortfalls", n, "effect", effect)
}

func opIndex(op Op) int {
	for i, o := range Ops {
		if o == op {
			return i
		}
	}
	panic("replicas: unknown op " + op.Name)
}

// Counts are the shortfalls so far, by op name (every op, 0 included).
func (w *Waiter) Counts() map[string]int64 {
	m := make(map[string]int64, len(Ops))
	for i, op := range Ops {
		var n int64
		if w != nil {
			n = w.counts[i].Load()
		}
		m[op.Name] = n
	}
	return m
}
