// Package boltcommit group-commits concurrent bbolt writes: one
// transaction, and one fsync, for every write that arrived while the
// previous commit was on disk.
package boltcommit

import (
	"errors"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Committer group-commits the writes to one file. It replaces bbolt's Batch, which gathers writes for a fixed delay
// and then queues its transaction behind the one in progress: under load
// the batches stay one delay long and line up, one fsync each, and the
// latency grows with the queue. Here a write that finds no commit in
// progress is committed at once (no delay at low load); the writes that
// arrive during a commit go together in the next one, however many (up to
// maxGroup), so a group grows with the load and its fsync is shared.
//
// As with Batch, a function that fails is taken out of its group and run
// again in a transaction of its own, whose error its caller gets, and the
// rest of the group is committed without it; so functions may be called
// more than once and must only change the transaction.
type Committer struct {
	db       *bolt.DB
	maxGroup int

	// writes are the idle writes, each with its channel: the Committer's
	// own, so that a channel never outlives the file's users (nor, in a
	// test, the synctest bubble that made it).
	writes sync.Pool

	mu    sync.Mutex
	queue []*write
	spare []*write // the last group's slice, for the next queue
	busy  bool     // a commit is in progress, or its goroutine takes the next group
}

// Op is one update: Apply changes the transaction only (it may be called
// more than once, see Committer).
type Op interface {
	Apply(tx *bolt.Tx) error
}

// Func is an Op of a function.
type Func func(*bolt.Tx) error

// Apply calls f.
func (f Func) Apply(tx *bolt.Tx) error { return f(tx) }

// write is one update waiting for its commit. Its caller owns it again
// once it has received from done: the committer sends on done last.
type write struct {
	op   Op
	done chan error // buffered: errSolo, or the group's commit error
}

// MaxGroup bounds the writes in one transaction (bbolt's default
// MaxBatchSize).
const MaxGroup = 1000

// New returns a Committer of db's writes, up to MaxGroup a transaction.
func New(db *bolt.DB) *Committer { return &Committer{db: db, maxGroup: MaxGroup} }

// errSolo tells a caller to run its function in a transaction of its own.
var errSolo = errors.New("run alone")

// Update runs fn in a write transaction shared with the concurrent
// writes, and returns once it is committed (fsync'd) or failed. fn may be
// called more than once (see Committer).
func (c *Committer) Update(fn func(*bolt.Tx) error) error { return c.Do(Func(fn)) }

// Do is Update of an Op: a pointer to a struct that carries the write's
// arguments and answer costs one allocation, where a closure that sets
// its caller's variables costs one for the closure and one for each
// variable.
func (c *Committer) Do(op Op) error {
	w, _ := c.writes.Get().(*write)
	if w == nil {
		w = &write{done: make(chan error, 1)}
	}
	w.op = op
	c.mu.Lock()
	c.queue = append(c.queue, w)
	if !c.busy {
		c.busy = true
		go c.drain()
	}
	c.mu.Unlock()
	err := <-w.done
	w.op = nil
	c.writes.Put(w)
	if err == errSolo {
		err = c.db.Update(op.Apply)
	}
	return err
}

// drain commits the queue, group by group, until it is empty.
func (c *Committer) drain() {
	var group []*write
	for {
		c.mu.Lock()
		if group != nil {
			clear(group)
			c.spare = group[:0]
		}
		n := min(len(c.queue), c.maxGroup)
		switch {
		case n == 0:
			c.busy = false
			c.mu.Unlock()
			return
		case n == len(c.queue): // the whole queue: swap in the spare slice
			group, c.queue, c.spare = c.queue, c.spare, nil
		default:
			group = make([]*write, n)
			copy(group, c.queue)
			rest := copy(c.queue, c.queue[n:])
			clear(c.queue[rest:])
			c.queue = c.queue[:rest]
		}
		c.mu.Unlock()
		c.commit(group)
	}
}

// commit runs group in one transaction. A function that fails is sent to
// run alone and the rest retried without it. Each write's done is the
// last use of it: its caller may reuse it at once.
func (c *Committer) commit(group []*write) {
	for len(group) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bolt.Tx) error {
			for i, w := range group {
				if err := safelyApply(w.op, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			w := group[failed]
			group = append(group[:failed], group[failed+1:]...)
			w.done <- errSolo
			continue
		}
		for _, w := range group {
			w.done <- err
		}
		return
	}
}

// safelyApply applies op, turning a panic into an error: the op is then
// run alone, on its caller's goroutine, where the panic is its own.
func safelyApply(op Op, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return op.Apply(tx)
}
