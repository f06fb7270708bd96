// Package pipeline coalesces concurrent Redis commands into pipelines, so
// that under load many requests share one round trip.
//
// A Batcher sends at most one pipeline at a time. A call that finds it
// idle starts a sender goroutine that sends its commands at once: a lone
// request waits for no timer. Calls that arrive while a pipeline is in
// flight queue up; when it returns, the whole queue (up to maxBatch
// commands) goes as the next pipeline. The sender lives only while the
// queue is not empty. Under load the batch grows to
// what arrives during one round trip, and the round trips per request
// fall with it.
//
// Each call's commands stay together and in order in one pipeline.
// Errors are per command: go-redis sets each command's own error, so a
// pipeline that fails (a broken connection) fails the commands sent in it
// and no others, and a Redis error answers only the command that caused
// it. A call whose context ends while it waits returns ctx.Err() at once;
// if its pipeline has not gone yet, its commands are dropped from it,
// otherwise their answers are discarded. A pipeline runs under a context
// that no single caller can cancel, with the latest deadline of the calls
// in it (none if one has none). On a Cluster client go-redis splits the
// pipeline by slot into one pipeline per node.
//
// With SetWait, a pipeline that holds a write (a DoWrite) ends with WAIT,
// so that its writes wait for replicas at the cost of one WAIT per
// pipeline, not per write; DoWrite answers how many replicas acknowledged.
package pipeline

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pipeliner is what a Batcher needs of a client: redis.UniversalClient has
// it.
type Pipeliner interface {
	Pipeline() redis.Pipeliner
}

// DefaultMaxBatch is the default bound on the commands in one pipeline.
const DefaultMaxBatch = 512

// Batcher coalesces the commands of concurrent calls into pipelines on one
// client. It is safe for concurrent use; its zero value is not usable:
// call New.
type Batcher struct {
	client   Pipeliner
	maxBatch int
	wait     func(context.Context) *redis.IntCmd // set by SetWait

	mu    sync.Mutex
	queue []*call
	busy  bool // a pipeline is in flight, or its sender is taking the next

	pipelines atomic.Int64
	commands  atomic.Int64
}

// call is one Do: its commands and how it is answered.
type call struct {
	ctx  context.Context
	cmds []redis.Cmder
	done chan struct{} // closed once the commands have their answers
	// write marks a DoWrite; acked is then its pipeline's WAIT answer.
	write bool
	acked int
	// gone is set when the caller stopped waiting: a call not sent yet
	// is left out.
	gone atomic.Bool
}

// New returns a Batcher on client sending at most maxBatch commands per
// pipeline (DefaultMaxBatch when 0 or less; a call with more commands
// still goes whole).
func New(client Pipeliner, maxBatch int) *Batcher {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	return &Batcher{client: client, maxBatch: maxBatch}
}

// SetWait makes every pipeline that holds a DoWrite's commands end with
// the command wait makes (a WAIT): one per pipeline, whatever the writes
// in it. Call it before the first call.
func (b *Batcher) SetWait(wait func(context.Context) *redis.IntCmd) { b.wait = wait }

// Do sends cmds, in order, in one pipeline shared with the calls that
// arrive at the same time, and waits for their answers. It returns the
// first command's error that is not redis.Nil, or ctx.Err() if ctx ends
// first; then the commands must not be read: they may still be answered.
func (b *Batcher) Do(ctx context.Context, cmds ...redis.Cmder) error {
	_, err := b.do(ctx, false, cmds)
	return err
}

// DoWrite is Do for commands that write: with SetWait, it also answers
// how many replicas acknowledged its pipeline's writes (0 when the WAIT
// failed after the commands were answered). Without SetWait, acked is 0.
func (b *Batcher) DoWrite(ctx context.Context, cmds ...redis.Cmder) (acked int, err error) {
	return b.do(ctx, true, cmds)
}

func (b *Batcher) do(ctx context.Context, write bool, cmds []redis.Cmder) (int, error) {
	if len(cmds) == 0 {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c := &call{ctx: ctx, cmds: cmds, done: make(chan struct{}), write: write}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if !b.busy {
		b.busy = true
		go b.drain()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.acked, firstErr(cmds)
	case <-ctx.Done():
		c.gone.Store(true)
		return 0, ctx.Err()
	}
}

// drain sends the queue, batch by batch, until it is empty.
func (b *Batcher) drain() {
	for {
		b.mu.Lock()
		var batch []*call
		for len(batch) == 0 && len(b.queue) > 0 {
			batch = b.take()
		}
		if len(batch) == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.exec(batch)
	}
}

// take removes from the queue the calls of the next pipeline: whole calls
// up to maxBatch commands (at least one call), leaving out those whose
// caller has gone. b.mu is held.
func (b *Batcher) take() []*call {
	n, cmds := 0, 0
	for n < len(b.queue) {
		c := b.queue[n]
		if cmds > 0 && cmds+len(c.cmds) > b.maxBatch {
			break
		}
		n++
		if !c.gone.Load() {
			cmds += len(c.cmds)
		}
	}
	batch := make([]*call, 0, n)
	for _, c := range b.queue[:n] {
		if !c.gone.Load() {
			batch = append(batch, c)
		}
	}
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return batch
}

// exec sends one pipeline of batch's commands and answers its calls. A
// panic in the client fails the batch's commands with an error, as it
// would have failed each caller's request: it must not take the process
// down from a goroutine no handler recovers, nor leave the callers waiting.
func (b *Batcher) exec(batch []*call) {
	defer func() {
		p := recover()
		for _, c := range batch {
			if p != nil {
				for _, cmd := range c.cmds {
					cmd.SetErr(fmt.Errorf("redis pipeline panicked: %v", p))
				}
			}
			close(c.done)
		}
	}()
	ctx, cancel := pipelineContext(batch)
	defer cancel()
	pipe := b.client.Pipeline()
	n, writes := 0, false
	for _, c := range batch {
		for _, cmd := range c.cmds {
			_ = pipe.Process(ctx, cmd) // a pipeline only queues it: never an error
			n++
		}
		writes = writes || c.write
	}
	var wait *redis.IntCmd
	if writes && b.wait != nil {
		// After every write of the pipeline, on its connection: WAIT
		// counts the replicas that have them all.
		wait = b.wait(ctx)
		_ = pipe.Process(ctx, wait)
		n++
	}
	b.pipelines.Add(1)
	b.commands.Add(int64(n))
	// Exec sets each command's own error, which its caller reads; its
	// return value is only the first of them.
	_, _ = pipe.Exec(ctx)
	if wait != nil {
		acked := int(wait.Val()) // 0 when WAIT failed
		for _, c := range batch {
			c.acked = acked
		}
	}
}

// pipelineContext is the context of a pipeline: detached from every
// caller's cancellation, ending at the latest of their deadlines, or
// never if one of them has none.
func pipelineContext(batch []*call) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

func firstErr(cmds []redis.Cmder) error {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && err != redis.Nil {
			return err
		}
	}
	return nil
}

// Stats counts what a Batcher has sent.
type Stats struct {
	Pipelines int64 // pipelines sent: round trips (per node on a Cluster)
	Commands  int64 // commands sent in them
}

// Stats returns the counts so far.
func (b *Batcher) Stats() Stats {
	return Stats{Pipelines: b.pipelines.Load(), Commands: b.commands.Load()}
}
