// Package boltqueue is the embedded sender.Queue: one bbolt file, each
// change one transaction, durable (fsync) before it returns, concurrent
// writes group-committed (internal/boltcommit).
package boltqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/boltcommit"
	"github.com/hookgate/hookgate/sender"
)

// The layout: a bucket "sender", in it a bucket per destination, holding
//
//	env     id -> state byte (q due, l leased, x dead) | score (8 bytes,
//	        big-endian unix ms: due, lease end or dead-at) | fingerprint (8)
//	        | envelope
//	due     score|id -> nil   (an index per state, in score order)
//	leased  score|id -> nil
//	dead    score|id -> nil
//	done    id -> fingerprint (8) | delivered at (8)
//	donet   delivered at|id -> nil
//	paused  who paused it, present while the destination is paused
var (
	rootBucket  = []byte("sender")
	corruptB    = []byte("sender_corrupt")  // dest NUL id -> the entry as it was stored
	redrivesB   = []byte("sender_redrives") // redrive id -> audit record, JSON
	envB, dueB  = []byte("env"), []byte("due")
	leasedB     = []byte("leased")
	deadB       = []byte("dead")
	doneB       = []byte("done")
	donetB      = []byte("donet")
	pausedKey   = []byte("paused")
	errBadEntry = errors.New("malformed stored envelope entry")
)

// trimBatch bounds the delivered IDs and dead letters forgotten per Settle.
const trimBatch = 100

// Queue is a sender.Queue on a bbolt file.
type Queue struct {
	db        *bolt.DB
	write     func(func(*bolt.Tx) error) error // a group-committed update (boltcommit)
	retention time.Duration
}

// New returns a Queue on db. Delivered IDs and dead letters are kept for
// retention.
func New(db *bolt.DB, retention time.Duration) (*Queue, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(rootBucket); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(corruptB); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(redrivesB)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating buckets: %w", err)
	}
	return &Queue{db: db, write: boltcommit.New(db).Update, retention: retention}, nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func indexKey(score int64, id string) []byte {
	b := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(b, uint64(score))
	return append(b, id...)
}

// dest is one destination's buckets.
type dest struct {
	b                                   *bolt.Bucket
	env, due, leased, dead, done, donet *bolt.Bucket
}

func (d dest) index(state byte) *bolt.Bucket {
	switch state {
	case 'q':
		return d.due
	case 'l':
		return d.leased
	}
	return d.dead
}

// destOf returns name's buckets, creating them in a writable tx; nil when
// a read finds none.
func destOf(tx *bolt.Tx, name string) (*dest, error) {
	root := tx.Bucket(rootBucket)
	b := root.Bucket([]byte(name))
	if b == nil {
		if !tx.Writable() {
			return nil, nil
		}
		var err error
		if b, err = root.CreateBucket([]byte(name)); err != nil {
			return nil, err
		}
		for _, n := range [][]byte{envB, dueB, leasedB, deadB, doneB, donetB} {
			if _, err := b.CreateBucket(n); err != nil {
				return nil, err
			}
		}
	}
	return &dest{b: b, env: b.Bucket(envB), due: b.Bucket(dueB), leased: b.Bucket(leasedB),
		dead: b.Bucket(deadB), done: b.Bucket(doneB), donet: b.Bucket(donetB)}, nil
}

// entry is an env value.
type entry struct {
	state byte
	score int64
	fp    [8]byte
	env   []byte // the marshalled envelope
}

func (e entry) marshal() []byte {
	b := make([]byte, 0, 17+len(e.env))
	b = append(b, e.state)
	b = binary.BigEndian.AppendUint64(b, uint64(e.score))
	b = append(b, e.fp[:]...)
	return append(b, e.env...)
}

func unmarshal(v []byte) (entry, error) {
	if len(v) < 17 {
		return entry{}, errBadEntry
	}
	return entry{state: v[0], score: int64(binary.BigEndian.Uint64(v[1:9])), fp: [8]byte(v[9:17]), env: v[17:]}, nil
}

func (d *dest) load(id string) (entry, bool, error) {
	v := d.env.Get([]byte(id))
	if v == nil {
		return entry{}, false, nil
	}
	e, err := unmarshal(v)
	return e, err == nil, err
}

// move writes e under id in its new state and score, keeping the indexes
// in step with old.
func (d *dest) move(id string, old *entry, e entry) error {
	if old != nil {
		if err := d.index(old.state).Delete(indexKey(old.score, id)); err != nil {
			return err
		}
	}
	if err := d.index(e.state).Put(indexKey(e.score, id), nil); err != nil {
		return err
	}
	return d.env.Put([]byte(id), e.marshal())
}

func (d *dest) remove(id string, old entry) error {
	if err := d.index(old.state).Delete(indexKey(old.score, id)); err != nil {
		return err
	}
	return d.env.Delete([]byte(id))
}

func (d *dest) paused() bool { return d.b.Get(pausedKey) != nil }

// pausedBy reads the pause and who made it (a file written before pauses
// were attributed holds a single byte 1: "unknown").
func (d *dest) pausedBy() (bool, string) {
	v := d.b.Get(pausedKey)
	switch {
	case v == nil:
		return false, ""
	case len(v) == 1 && v[0] == 1:
		return true, "unknown"
	}
	return true, string(v)
}

// Enqueue implements sender.Queue.
func (q *Queue) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	fp := sender.Fingerprint(e.Payload)
	var res sender.EnqueueResult
	err := q.write(func(tx *bolt.Tx) error {
		d, err := destOf(tx, e.Destination)
		if err != nil {
			return err
		}
		cur, ok, err := d.load(e.ID)
		if err != nil {
			return err
		}
		if ok {
			res = sender.EnqueueResult{State: stateOf(cur.state, d.paused()), Duplicate: true, Mismatch: cur.fp != fp}
			return nil
		}
		if v := d.done.Get([]byte(e.ID)); len(v) == 16 {
			at := int64(binary.BigEndian.Uint64(v[8:]))
			if at > ms(e.CreatedAt.Add(-q.retention)) {
				res = sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true, Mismatch: [8]byte(v[:8]) != fp}
				return nil
			}
		}
		res = sender.EnqueueResult{State: stateOf('q', d.paused())}
		return d.move(e.ID, nil, entry{state: 'q', score: ms(e.NextAt), fp: fp, env: sender.MarshalEnvelope(e)})
	})
	if err != nil {
		return sender.EnqueueResult{}, fmt.Errorf("bolt enqueue: %w", err)
	}
	return res, nil
}

func stateOf(s byte, paused bool) sender.State {
	switch s {
	case 'l':
		return sender.StateLeased
	case 'x':
		return sender.StateDead
	}
	if paused {
		return sender.StatePaused
	}
	return sender.StateQueued
}

// expiredLeases bounds the leases recovered per Lease call.
const expiredLeases = 1000

// Lease implements sender.Queue.
func (q *Queue) Lease(ctx context.Context, name string, n int, now time.Time, lease time.Duration) ([]sender.Leased, error) {
	until := ms(now.Add(lease))
	var out []sender.Leased
	err := q.write(func(tx *bolt.Tx) error {
		out = out[:0] // a grouped function may run twice
		d, err := destOf(tx, name)
		if err != nil || d.paused() {
			return err
		}
		// Expired leases go back to due.
		var expired [][]byte
		c := d.leased.Cursor()
		for k, _ := c.First(); k != nil && len(expired) < expiredLeases && int64(binary.BigEndian.Uint64(k[:8])) <= ms(now); k, _ = c.Next() {
			expired = append(expired, append([]byte(nil), k...))
		}
		for _, k := range expired {
			id := string(k[8:])
			e, ok, err := d.load(id)
			if !ok {
				// A stale index entry, or an entry that does not decode:
				// set aside, as on the due index, so that it does not stop
				// every lease of the destination.
				if err := d.leased.Delete(k); err != nil {
					return err
				}
				if err != nil {
					if err := tx.Bucket(corruptB).Put([]byte(name+"\x00"+id), append([]byte(nil), d.env.Get([]byte(id))...)); err != nil {
						return err
					}
					if err := d.env.Delete([]byte(id)); err != nil {
						return err
					}
				}
				continue
			}
			next := e
			next.state, next.score = 'q', ms(now)
			if err := d.move(id, &e, next); err != nil {
				return err
			}
		}
		var keys [][]byte
		c = d.due.Cursor()
		for k, _ := c.First(); k != nil && len(keys) < n && int64(binary.BigEndian.Uint64(k[:8])) <= ms(now); k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			id := string(k[8:])
			raw := d.env.Get([]byte(id))
			e, err := unmarshal(raw)
			var env *sender.Envelope
			if err == nil {
				env, err = sender.UnmarshalEnvelope(e.env)
			}
			if raw == nil || err != nil {
				// A stale index entry, or one that does not decode: set
				// aside, so that it does not fail every lease.
				if err := d.due.Delete(k); err != nil {
					return err
				}
				if raw != nil {
					if err := tx.Bucket(corruptB).Put([]byte(name+"\x00"+id), append([]byte(nil), raw...)); err != nil {
						return err
					}
					if err := d.env.Delete([]byte(id)); err != nil {
						return err
					}
				}
				continue
			}
			next := e
			next.state, next.score = 'l', until
			if err := d.move(id, &e, next); err != nil {
				return err
			}
			out = append(out, sender.Leased{Envelope: env, LeaseUntil: time.UnixMilli(until)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt lease: %w", err)
	}
	return out, nil
}

// Settle implements sender.Queue.
func (q *Queue) Settle(ctx context.Context, name string, outcomes []sender.Outcome, now time.Time) (int, error) {
	if len(outcomes) == 0 {
		return 0, nil
	}
	skipped := 0
	err := q.write(func(tx *bolt.Tx) error {
		skipped = 0
		d, err := destOf(tx, name)
		if err != nil {
			return err
		}
		for _, o := range outcomes {
			cur, ok, err := d.load(o.ID)
			if err != nil {
				return err
			}
			if !ok || cur.state != 'l' || cur.score != ms(o.LeaseUntil) {
				skipped++
				continue
			}
			switch o.Kind {
			case sender.Delivered:
				if err := d.remove(o.ID, cur); err != nil {
					return err
				}
				v := append(cur.fp[:], binary.BigEndian.AppendUint64(nil, uint64(ms(now)))...)
				if err := d.done.Put([]byte(o.ID), v); err != nil {
					return err
				}
				if err := d.donet.Put(indexKey(ms(now), o.ID), nil); err != nil {
					return err
				}
			case sender.Release:
				next := cur
				next.state, next.score = 'q', ms(now)
				err = d.move(o.ID, &cur, next)
			case sender.Retry:
				err = d.move(o.ID, &cur, entry{state: 'q', score: ms(o.Envelope.NextAt), fp: cur.fp, env: sender.MarshalEnvelope(o.Envelope)})
			case sender.Dead:
				err = d.move(o.ID, &cur, entry{state: 'x', score: ms(o.Envelope.DeadAt), fp: cur.fp, env: sender.MarshalEnvelope(o.Envelope)})
			default:
				err = fmt.Errorf("unknown outcome %d", o.Kind)
			}
			if err != nil {
				return err
			}
		}
		return q.trim(d, now)
	})
	if err != nil {
		return 0, fmt.Errorf("bolt settle: %w", err)
	}
	return skipped, nil
}

// trim forgets delivered IDs and dead letters past the retention, a
// bounded number per call.
func (q *Queue) trim(d *dest, now time.Time) error {
	cutoff := ms(now.Add(-q.retention))
	var old [][]byte
	c := d.donet.Cursor()
	for k, _ := c.First(); k != nil && len(old) < trimBatch && int64(binary.BigEndian.Uint64(k[:8])) <= cutoff; k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if err := d.donet.Delete(k); err != nil {
			return err
		}
		if err := d.done.Delete(k[8:]); err != nil {
			return err
		}
	}
	old = old[:0]
	c = d.dead.Cursor()
	for k, _ := c.First(); k != nil && len(old) < trimBatch && int64(binary.BigEndian.Uint64(k[:8])) <= cutoff; k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if err := d.dead.Delete(k); err != nil {
			return err
		}
		if err := d.env.Delete(k[8:]); err != nil {
			return err
		}
	}
	return nil
}

// SetPaused implements sender.Queue.
func (q *Queue) SetPaused(ctx context.Context, name string, paused bool, by string) error {
	err := q.db.Update(func(tx *bolt.Tx) error {
		d, err := destOf(tx, name)
		if err != nil {
			return err
		}
		if paused {
			if by == "" {
				by = "unknown"
			}
			return d.b.Put(pausedKey, []byte(by))
		}
		return d.b.Delete(pausedKey)
	})
	if err != nil {
		return fmt.Errorf("bolt pause: %w", err)
	}
	return nil
}

// Paused implements sender.Queue.
func (q *Queue) Paused(ctx context.Context, name string) (paused bool, by string, err error) {
	err = q.db.View(func(tx *bolt.Tx) error {
		d, err := destOf(tx, name)
		if err != nil || d == nil {
			return err
		}
		paused, by = d.pausedBy()
		return nil
	})
	if err != nil {
		return false, "", fmt.Errorf("bolt paused: %w", err)
	}
	return paused, by, nil
}

// Stats implements sender.Queue.
func (q *Queue) Stats(ctx context.Context, name string, now time.Time) (sender.Stats, error) {
	var s sender.Stats
	err := q.db.View(func(tx *bolt.Tx) error {
		d, err := destOf(tx, name)
		if err != nil || d == nil {
			return err
		}
		s.Queued, s.Leased, s.Dead = d.due.Stats().KeyN, d.leased.Stats().KeyN, d.dead.Stats().KeyN
		s.Paused, s.PausedBy = d.pausedBy()
		c := tx.Bucket(corruptB).Cursor()
		prefix := []byte(name + "\x00")
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			s.Corrupt++
		}
		if k, _ := d.due.Cursor().First(); k != nil {
			if at := time.UnixMilli(int64(binary.BigEndian.Uint64(k[:8]))); !at.After(now) {
				s.OldestReady = now.Sub(at)
			}
		}
		if k, _ := d.dead.Cursor().First(); k != nil {
			s.OldestDead = time.UnixMilli(int64(binary.BigEndian.Uint64(k[:8])))
		}
		return nil
	})
	if err != nil {
		return sender.Stats{}, fmt.Errorf("bolt stats: %w", err)
	}
	return s, nil
}

// Dead implements sender.Queue. The cursor is "<dead-at ms>:<id>".
func (q *Queue) Dead(ctx context.Context, name, cursor string, limit int) ([]*sender.Envelope, string, error) {
	var start []byte
	if cursor != "" {
		s, id, ok := strings.Cut(cursor, ":")
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil {
			return nil, "", fmt.Errorf("%w: bad cursor %q", sender.ErrBadFilter, cursor)
		}
		start = indexKey(n, id)
	}
	var out []*sender.Envelope
	next := ""
	err := q.db.View(func(tx *bolt.Tx) error {
		d, err := destOf(tx, name)
		if err != nil || d == nil {
			return err
		}
		c := d.dead.Cursor()
		k, _ := c.First()
		if start != nil {
			k, _ = c.Seek(start)
			if k != nil && bytes.Equal(k, start) {
				k, _ = c.Next()
			}
		}
		for ; k != nil && len(out) < limit; k, _ = c.Next() {
			e, ok, err := d.load(string(k[8:]))
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			env, err := sender.UnmarshalEnvelope(e.env)
			if err != nil {
				return err
			}
			out = append(out, env)
			if len(out) == limit {
				next = fmt.Sprintf("%d:%s", int64(binary.BigEndian.Uint64(k[:8])), k[8:])
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("bolt dead: %w", err)
	}
	return out, next, nil
}

// Get implements sender.Queue.
func (q *Queue) Get(ctx context.Context, name, id string) (*sender.Envelope, sender.State, error) {
	var env *sender.Envelope
	var state sender.State
	err := q.db.View(func(tx *bolt.Tx) error {
		d, err := destOf(tx, name)
		if err != nil || d == nil {
			return err
		}
		e, ok, err := d.load(id)
		if err != nil || !ok {
			return err
		}
		state = stateOf(e.state, d.paused())
		env, err = sender.UnmarshalEnvelope(e.env)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("bolt get: %w", err)
	}
	if env == nil {
		return nil, "", sender.ErrNotFound
	}
	return env, state, nil
}

// Redrive implements sender.Queue.
func (q *Queue) Redrive(ctx context.Context, name string, ids []string, redriveID string, now time.Time) ([]string, error) {
	var moved []string
	err := q.write(func(tx *bolt.Tx) error {
		moved = moved[:0]
		d, err := destOf(tx, name)
		if err != nil {
			return err
		}
		for _, id := range ids {
			cur, ok, err := d.load(id)
			if err != nil {
				return err
			}
			if !ok || cur.state != 'x' {
				continue
			}
			env, err := sender.UnmarshalEnvelope(cur.env)
			if err != nil {
				return err
			}
			sender.Redriven(env, redriveID, now)
			if err := d.move(id, &cur, entry{state: 'q', score: ms(now), fp: cur.fp, env: sender.MarshalEnvelope(env)}); err != nil {
				return err
			}
			moved = append(moved, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt redrive: %w", err)
	}
	return moved, nil
}

// Purge implements sender.Queue.
func (q *Queue) Purge(ctx context.Context, name string, ids []string) (int, error) {
	removed := 0
	err := q.write(func(tx *bolt.Tx) error {
		removed = 0
		d, err := destOf(tx, name)
		if err != nil {
			return err
		}
		for _, id := range ids {
			cur, ok, err := d.load(id)
			if err != nil {
				return err
			}
			if !ok || cur.state != 'x' {
				continue
			}
			if err := d.remove(id, cur); err != nil {
				return err
			}
			removed++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bolt purge: %w", err)
	}
	return removed, nil
}

var _ sender.Queue = (*Queue)(nil)

// PutRedrive implements sender.Audit.
func (q *Queue) PutRedrive(ctx context.Context, r *sender.Redrive) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	err = q.write(func(tx *bolt.Tx) error { return tx.Bucket(redrivesB).Put([]byte(r.ID), b) })
	if err != nil {
		return fmt.Errorf("bolt put redrive: %w", err)
	}
	return nil
}

// GetRedrive implements sender.Audit.
func (q *Queue) GetRedrive(ctx context.Context, id string) (*sender.Redrive, error) {
	var r *sender.Redrive
	err := q.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(redrivesB).Get([]byte(id))
		if b == nil {
			return nil
		}
		r = new(sender.Redrive)
		return json.Unmarshal(b, r)
	})
	if err != nil {
		return nil, fmt.Errorf("bolt get redrive: %w", err)
	}
	if r == nil {
		return nil, sender.ErrNotFound
	}
	return r, nil
}

var _ sender.Audit = (*Queue)(nil)
