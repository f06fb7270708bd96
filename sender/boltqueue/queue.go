// Package boltqueue is the embedded sender.Queue: one bbolt file, each
// change one transaction, durable (fsync) before it returns, concurrent
// writes group-committed (internal/boltcommit).
package boltqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/boltcommit"
	"github.com/hookgate/hookgate/sender"
)

// trimBatch bounds the history entries, kept payloads, dead letters and
// redrive counts forgotten per Settle, of each.
const trimBatch = 100

// Queue is a sender.Queue on a bbolt file.
type Queue struct {
	db        *bolt.DB
	write     func(func(*bolt.Tx) error) error // a group-committed update (boltcommit)
	retention time.Duration
	history   sender.History // set before use (KeepHistory)
	ordering  sync.Map       // destination name -> sender.Ordering
}

// New returns a Queue on db. Dead letters and redrive counts are kept for
// retention; what settled, for retention too unless KeepHistory says
// otherwise. A file whose sender's layout is not LayoutVersion is refused
// (ErrLayout), never read in part; a file without a sender's queue is
// given one.
func New(db *bolt.DB, retention time.Duration) (*Queue, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		if err := checkLayout(tx, db.Path()); err != nil {
			return err
		}
		for _, name := range [][]byte{rootBucket, corruptB, redrivesB, sinceB} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ErrLayout) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("opening the sender's buckets: %w", err)
	}
	return &Queue{db: db, write: boltcommit.New(db).Update, retention: retention, history: sender.History{Keep: retention}}, nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// Enqueue implements sender.Queue.
func (q *Queue) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	m := sender.MetaOf(e)
	ordered := e.Entity != "" && q.orderOf(e.Destination).ByEntity
	var res sender.EnqueueResult
	err := q.update(e.Destination, func(_ *bolt.Tx, d *dest) error {
		cur, ok, err := d.load(e.ID)
		if err != nil {
			return err
		}
		if ok {
			old, err := d.record(e.ID)
			if err != nil {
				return err
			}
			res = sender.EnqueueResult{State: stateOf(cur.state, d.paused()), Duplicate: true, Mismatch: old.Fingerprint != m.Fingerprint}
			return nil
		}
		dl, ok, err := d.delivered(e.ID)
		if err != nil {
			return err
		}
		// Within the history's keep the ID is a duplicate.
		if ok && dl.at >= ms(e.CreatedAt.Add(-q.history.Keep)) {
			res = sender.EnqueueResult{State: sender.StateDelivered, Duplicate: true, Mismatch: dl.fp != m.Fingerprint}
			return nil
		}
		state, score := byte('q'), ms(e.NextAt)
		if ordered {
			if state, score, err = d.join(e.ID, e.Entity, score); err != nil {
				return err
			}
		}
		res = sender.EnqueueResult{State: stateOf(state, d.paused())}
		return d.put(e, m, state, score)
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

// due reports whether a Lease at now would change anything: a lease has
// expired, or an envelope is due. An idle destination is answered by a
// read, so that polling it writes nothing.
func (d *dest) work(now int64) bool {
	if d.paused() {
		return false
	}
	if k, _ := d.leased.Cursor().First(); k != nil && scoreOf(k) <= now {
		return true
	}
	k, _ := d.due.Cursor().First()
	return k != nil && scoreOf(k) <= now
}

// Due implements sender.Queue: one read transaction over every dest.
func (q *Queue) Due(_ context.Context, dests []string, now time.Time) ([]string, error) {
	var out []string
	err := q.db.View(func(tx *bolt.Tx) error {
		for _, name := range dests {
			d, err := destOf(tx, name)
			if err != nil {
				return err
			}
			if d != nil && d.work(ms(now)) {
				out = append(out, name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt due: %w", err)
	}
	return out, nil
}

// Lease implements sender.Queue.
func (q *Queue) Lease(ctx context.Context, name string, n int, now time.Time, lease time.Duration) ([]sender.Leased, error) {
	var work bool
	if err := q.view(name, func(d *dest) error {
		work = d != nil && d.work(ms(now))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("bolt lease: %w", err)
	}
	if !work {
		return nil, nil
	}
	until := ms(now.Add(lease))
	var out []sender.Leased
	err := q.update(name, func(tx *bolt.Tx, d *dest) error {
		out = out[:0] // a grouped function may run twice
		if d.paused() {
			return nil
		}
		// Expired leases go back to due.
		var expired [][]byte
		c := d.leased.Cursor()
		for k, _ := c.First(); k != nil && len(expired) < expiredLeases && scoreOf(k) <= ms(now); k, _ = c.Next() {
			expired = append(expired, append([]byte(nil), k...))
		}
		for _, k := range expired {
			id := string(k[8:])
			e, ok, err := d.load(id)
			if !ok || err != nil || e.state != 'l' {
				// A stale index entry, or one that does not decode: set
				// aside, so that it does not stop every lease.
				if err := d.setAside(id, k, 'l', ms(now)); err != nil {
					return err
				}
				continue
			}
			if err := d.setState(id, e, 'q', ms(now)); err != nil {
				return err
			}
		}
		var keys [][]byte
		c = d.due.Cursor()
		for k, _ := c.First(); k != nil && len(keys) < n && scoreOf(k) <= ms(now); k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			id := string(k[8:])
			env, cur, err := d.envelope(id)
			if err != nil || cur.state != 'q' {
				if err := d.setAside(id, k, 'q', ms(now)); err != nil {
					return err
				}
				continue
			}
			if err := d.setState(id, cur, 'l', until); err != nil {
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

// envelope reads and assembles id's whole envelope (its payload copied
// out of the file), and its entry.
func (d *dest) envelope(id string) (*sender.Envelope, entry, error) {
	cur, ok, err := d.load(id)
	if err != nil {
		return nil, entry{}, err
	}
	if !ok {
		return nil, entry{}, sender.ErrNotFound
	}
	m, err := d.record(id)
	if err != nil {
		return nil, cur, err
	}
	log, err := sender.UnmarshalLog(d.log.Get([]byte(id)))
	if err != nil {
		return nil, cur, err
	}
	if cur.state == 'x' {
		m.DeadAt = time.UnixMilli(cur.score)
	}
	e, err := sender.Assemble(m, append([]byte(nil), cur.payload...), log)
	return e, cur, err
}

// Settle implements sender.Queue.
func (q *Queue) Settle(ctx context.Context, name string, outcomes []sender.Outcome, now time.Time) (int, error) {
	if len(outcomes) == 0 {
		return 0, nil
	}
	skipped := 0
	hold := q.orderOf(name).Hold
	err := q.update(name, func(_ *bolt.Tx, d *dest) error {
		skipped = 0
		for _, o := range outcomes {
			cur, ok, err := d.load(o.ID)
			if err != nil {
				return err
			}
			if !ok || cur.state != 'l' || cur.score != ms(o.LeaseUntil) {
				skipped++
				continue
			}
			m, err := d.record(o.ID)
			if err != nil {
				return err
			}
			switch o.Kind {
			case sender.Delivered:
				err = q.deliver(d, o, m, cur, ms(now))
			case sender.Release:
				err = d.setState(o.ID, cur, 'q', ms(now))
			case sender.Retry:
				err = d.rewrite(o.ID, sender.MarshalMeta(settledMeta(o.Envelope, m)), sender.MarshalLog(o.Envelope.Log), cur, 'q', ms(o.Envelope.NextAt))
			case sender.Dead:
				// A dead letter, and an entry in the history.
				dm, log := settledMeta(o.Envelope, m), sender.MarshalLog(o.Envelope.Log)
				if err = d.rewrite(o.ID, sender.MarshalMeta(dm), log, cur, 'x', ms(o.Envelope.DeadAt)); err == nil {
					err = d.addHistory(o.ID, histDead, historyRecord(*dm), log, ms(now))
				}
				if err == nil && m.Entity != "" {
					if hold {
						err = d.hold(o.ID)
					} else {
						err = d.leave(o.ID, cur.state, ms(now))
					}
				}
				if err == nil {
					err = d.redriveCount(m.RedriveID, rdDeadAgain, 1, ms(now))
				}
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

// deliver moves a delivered envelope out of the queue into the history:
// its record (historyRecord) and log as the outcome left them (as stored
// when it carries no envelope), and its payload while the history keeps
// payloads.
func (q *Queue) deliver(d *dest, o sender.Outcome, stored *sender.Meta, cur entry, now int64) error {
	m, log := stored, d.log.Get([]byte(o.ID))
	if o.Envelope != nil {
		m, log = settledMeta(o.Envelope, stored), sender.MarshalLog(o.Envelope.Log)
	}
	rec := historyRecord(*m)
	if err := d.addHistory(o.ID, histDelivered, rec, log, now); err != nil {
		return err
	}
	if q.history.Payload > 0 {
		if err := d.keepPayload(o.ID, cur.payload, now+q.history.Payload.Milliseconds()); err != nil {
			return err
		}
	}
	if err := d.remove(o.ID, cur); err != nil {
		return err
	}
	if stored.Entity != "" {
		if err := d.leave(o.ID, cur.state, now); err != nil {
			return err
		}
	}
	return d.redriveCount(stored.RedriveID, rdDelivered, 1, now)
}

// settledMeta is the record of e as an outcome left it; its payload, and
// so its size and fingerprint, are as stored.
func settledMeta(e *sender.Envelope, stored *sender.Meta) *sender.Meta {
	m := sender.MetaOf(e)
	m.Size, m.Fingerprint = stored.Size, stored.Fingerprint
	return m
}

// rewrite writes a settled envelope's record and log in a new state.
func (d *dest) rewrite(id string, rec, log []byte, cur entry, state byte, score int64) error {
	if err := d.meta.Put([]byte(id), rec); err != nil {
		return err
	}
	if err := d.log.Put([]byte(id), log); err != nil {
		return err
	}
	return d.setState(id, cur, state, score)
}

// trim forgets what settled past the history's keep, payloads past
// theirs, dead letters (with their history entries, as a purge does) and
// redrive counts past the retention, a bounded number per call.
func (q *Queue) trim(d *dest, now time.Time) error {
	if err := d.trimHistory(ms(now), q.history.Keep); err != nil {
		return err
	}
	cutoff := ms(now.Add(-q.retention))
	var old [][]byte
	c := d.dead.Cursor()
	for k, _ := c.First(); k != nil && len(old) < trimBatch && scoreOf(k) <= cutoff; k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		cur, ok, err := d.load(string(k[8:]))
		if err != nil || !ok || cur.state != 'x' || cur.score != scoreOf(k) {
			if err := d.dead.Delete(k); err != nil {
				return err
			}
			continue
		}
		if err := d.remove(string(k[8:]), cur); err != nil {
			return err
		}
		if err := d.leave(string(k[8:]), cur.state, ms(now)); err != nil {
			return err
		}
		// Its history entry goes too, as a purged letter's does: no row
		// is left listed whose letter is not found.
		if err := d.forgetEntry(string(k[8:])); err != nil {
			return err
		}
	}
	old = old[:0]
	c = d.rdTimes.Cursor()
	for k, _ := c.First(); k != nil && len(old) < trimBatch && scoreOf(k) <= cutoff; k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if err := d.rdTimes.Delete(k); err != nil {
			return err
		}
		if err := d.rdCounts.Delete(k[8:]); err != nil {
			return err
		}
	}
	return nil
}

// SetPaused implements sender.Queue.
func (q *Queue) SetPaused(ctx context.Context, name string, paused bool, by string) error {
	err := q.update(name, func(_ *bolt.Tx, d *dest) error {
		if !paused {
			if cur, who := d.pausedBy(); cur && by != "" && who != by {
				return fmt.Errorf("%w: %s is paused by another than %s", sender.ErrPausedByOther, name, by)
			}
			return d.b.Delete(pausedKey)
		}
		if by == "" {
			by = "unknown"
		}
		return d.b.Put(pausedKey, []byte(by))
	})
	if err != nil {
		return fmt.Errorf("bolt pause: %w", err)
	}
	return nil
}

// Paused implements sender.Queue.
func (q *Queue) Paused(ctx context.Context, name string) (paused bool, by string, err error) {
	err = q.view(name, func(d *dest) error {
		if d != nil {
			paused, by = d.pausedBy()
		}
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
	err := q.view(name, func(d *dest) error {
		if d == nil {
			return nil
		}
		s.Queued, s.Leased, s.Dead, s.History = int(d.queued+d.waitingN), int(d.leasedN), int(d.deadN), int(d.histN)
		s.Waiting, s.Held = int(d.waitingN), int(d.heldN)
		s.Paused, s.PausedBy = d.pausedBy()
		c := d.corrupt.Cursor()
		prefix := []byte(name + "\x00")
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			s.Corrupt++
		}
		if k, _ := d.due.Cursor().First(); k != nil {
			if at := time.UnixMilli(scoreOf(k)); !at.After(now) {
				s.OldestReady = now.Sub(at)
			}
		}
		if k, _ := d.dead.Cursor().First(); k != nil {
			s.OldestDead = time.UnixMilli(scoreOf(k))
		}
		return nil
	})
	if err != nil {
		return sender.Stats{}, fmt.Errorf("bolt stats: %w", err)
	}
	return s, nil
}

// Get implements sender.Queue.
func (q *Queue) Get(ctx context.Context, name, id string) (*sender.Envelope, sender.State, error) {
	var env *sender.Envelope
	var state sender.State
	err := q.view(name, func(d *dest) error {
		if d == nil {
			return sender.ErrNotFound
		}
		e, cur, err := d.envelope(id)
		if errors.Is(err, sender.ErrNotFound) {
			env, err = d.fromHistory(id, ms(q.now()))
			state = sender.StateDelivered
			return err
		}
		if err != nil {
			return err
		}
		env, state = e, stateOf(cur.state, d.paused())
		return nil
	})
	if errors.Is(err, sender.ErrNotFound) {
		return nil, "", sender.ErrNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("bolt get: %w", err)
	}
	return env, state, nil
}

// Destinations implements sender.Queue.
func (q *Queue) Destinations(ctx context.Context) ([]string, error) {
	var out []string
	err := q.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(rootBucket).ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("bolt destinations: %w", err)
	}
	return out, nil
}

// FirstSeen implements sender.Queue.
func (q *Queue) FirstSeen(ctx context.Context, dests []string, now time.Time) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(dests))
	err := q.write(func(tx *bolt.Tx) error {
		b := tx.Bucket(sinceB)
		for _, name := range dests {
			v := b.Get([]byte(name))
			if len(v) != 8 {
				v = binary.BigEndian.AppendUint64(nil, uint64(ms(now)))
				if err := b.Put([]byte(name), v); err != nil {
					return err
				}
			}
			out[name] = time.UnixMilli(int64(binary.BigEndian.Uint64(v)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt first seen: %w", err)
	}
	return out, nil
}

var _ sender.Queue = (*Queue)(nil)

// Order implements sender.Queue.
func (q *Queue) Order(dest string, o sender.Ordering) { q.ordering.Store(dest, o) }

// orderOf is dest's ordering (Order).
func (q *Queue) orderOf(dest string) sender.Ordering {
	o, _ := q.ordering.Load(dest)
	v, _ := o.(sender.Ordering)
	return v
}
