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
//	env      id -> state byte (q due, l leased, x dead) | score (8 bytes,
//	         big-endian unix ms: due, lease end or dead-at) | payload
//	meta     id -> the envelope's record (sender.MarshalMeta)
//	log      id -> its attempt log (sender.MarshalLog), absent while empty
//	due      score|id -> nil   (an index per state, in score order)
//	leased   score|id -> nil
//	dead     score|id -> nil
//	hist     settled at (8, big-endian unix ms) | sequence (8, the
//	         bucket's NextSequence: those settled in one millisecond keep
//	         their order) -> the history: state byte (d delivered, x dead)
//	         | string id | string record (sender.MarshalMeta) | attempt
//	         log (sender.MarshalLog, the rest); one entry per ID, its
//	         newest: an envelope that settles again replaces its entry
//	hidx     id -> its hist key
//	hpay     id -> expiry (8, unix ms) | the payload of its delivery, kept
//	         for History.Payload
//	hpayt    expiry|id -> nil (trims hpay)
//	redrives redrive id -> moved, delivered, dead again, superseded (8
//	         bytes each) | first moved at (8)
//	redrivet first moved at|redrive id -> nil (trims redrives)
//	counts   (a key) queued, leased, dead, history entries (8 bytes
//	         each), kept with the indexes, so that Stats walks nothing
//	paused   (a key) who paused it, present while the destination is paused
//
// where a string is a uvarint length and its bytes. A delivered ID is a
// duplicate for the enqueue while its hist entry is within History.Keep;
// hist, hidx and hpay are trimmed by Settle, a bounded number at a time.
var (
	rootBucket = []byte("sender")
	corruptB   = []byte("sender_corrupt")  // dest NUL id -> the entry as it was stored
	redrivesB  = []byte("sender_redrives") // redrive id -> audit record, JSON
	sinceB     = []byte("sender_since")    // dest -> first seen, unix ms (8 bytes): a fan-out's "added later"
	layoutB    = []byte("sender_layout")   // "version" -> LayoutVersion
	versionKey = []byte("version")
	envB, dueB = []byte("env"), []byte("due")
	metaB      = []byte("meta")
	logB       = []byte("log")
	leasedB    = []byte("leased")
	deadB      = []byte("dead")
	histB      = []byte("hist")
	hidxB      = []byte("hidx")
	hpayB      = []byte("hpay")
	hpaytB     = []byte("hpayt")
	rdCountsB  = []byte("redrives")
	rdTimesB   = []byte("redrivet")
	countsKey  = []byte("counts")
	pausedKey  = []byte("paused")
	// subBuckets are a destination's buckets, the newest last: a
	// destination that lacks the last lacks some.
	subBuckets = [][]byte{envB, metaB, logB, dueB, leasedB, deadB, rdCountsB, rdTimesB, histB, hidxB, hpayB, hpaytB}

	errBadEntry = errors.New("malformed stored envelope entry")
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

// LayoutVersion is the version of the layout above. hookgate was never
// released with an earlier one, and reads none.
const LayoutVersion = "3"

// ErrLayout means a file whose sender's queue is in another layout than
// LayoutVersion.
var ErrLayout = errors.New("the sender's queue is in another layout")

// checkLayout refuses a file whose sender's layout version is not
// LayoutVersion: one that records another, or one that holds
// destinations but records none (written before the version was kept).
// It records the version in a file that holds no destination.
func checkLayout(tx *bolt.Tx, path string) error {
	refuse := func(version string) error {
		return fmt.Errorf("%w: %s holds the sender's queue in layout version %s, and this hookgate reads version %s only; "+
			"start it on a fresh store: stop hookgate and move the file aside, or give it another store directory "+
			"(no version of hookgate reads the old layout)", ErrLayout, path, version, LayoutVersion)
	}
	if b := tx.Bucket(layoutB); b != nil {
		if v := string(b.Get(versionKey)); v != LayoutVersion {
			return refuse(strconv.Quote(v))
		}
		return nil
	}
	if root := tx.Bucket(rootBucket); root != nil {
		if k, _ := root.Cursor().First(); k != nil {
			return refuse("2 or earlier (none recorded)")
		}
	}
	b, err := tx.CreateBucket(layoutB)
	if err != nil {
		return err
	}
	return b.Put(versionKey, []byte(LayoutVersion))
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func indexKey(score int64, id string) []byte {
	b := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(b, uint64(score))
	return append(b, id...)
}

func scoreOf(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[:8])) }

// dest is one destination's buckets.
type dest struct {
	name                    string
	b                       *bolt.Bucket
	env, meta, log          *bolt.Bucket
	due, leased, dead       *bolt.Bucket
	rdCounts, rdTimes       *bolt.Bucket
	hist, hidx, hpay, hpayt *bolt.Bucket
	corrupt                 *bolt.Bucket
	queued, leasedN, deadN  int64 // the counts, as read
	histN                   int64 // hidx's keys: the history's entries
	countsChanged           bool
}

func (d *dest) index(state byte) *bolt.Bucket {
	switch state {
	case 'q':
		return d.due
	case 'l':
		return d.leased
	}
	return d.dead
}

func (d *dest) count(state byte, delta int64) {
	switch state {
	case 'q':
		d.queued += delta
	case 'l':
		d.leasedN += delta
	default:
		d.deadN += delta
	}
	d.countsChanged = true
}

// flush writes the counts back, when they changed.
func (d *dest) flush() error {
	if !d.countsChanged {
		return nil
	}
	d.countsChanged = false
	v := make([]byte, 0, 32)
	for _, n := range []int64{d.queued, d.leasedN, d.deadN, d.histN} {
		v = binary.BigEndian.AppendUint64(v, uint64(max(n, 0)))
	}
	return d.b.Put(countsKey, v)
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
	}
	if tx.Writable() && b.Bucket(subBuckets[len(subBuckets)-1]) == nil {
		for _, n := range subBuckets {
			if _, err := b.CreateBucketIfNotExists(n); err != nil {
				return nil, err
			}
		}
	}
	d := &dest{name: name, b: b, env: b.Bucket(envB), meta: b.Bucket(metaB), log: b.Bucket(logB),
		due: b.Bucket(dueB), leased: b.Bucket(leasedB), dead: b.Bucket(deadB),
		rdCounts: b.Bucket(rdCountsB), rdTimes: b.Bucket(rdTimesB),
		hist: b.Bucket(histB), hidx: b.Bucket(hidxB), hpay: b.Bucket(hpayB), hpayt: b.Bucket(hpaytB),
		corrupt: tx.Bucket(corruptB)}
	if d.hpayt == nil {
		// Read-only, before the destination's first write made its
		// buckets: it holds nothing.
		return nil, nil
	}
	if v := b.Get(countsKey); len(v) == 32 {
		d.queued = int64(binary.BigEndian.Uint64(v))
		d.leasedN = int64(binary.BigEndian.Uint64(v[8:]))
		d.deadN = int64(binary.BigEndian.Uint64(v[16:]))
		d.histN = int64(binary.BigEndian.Uint64(v[24:]))
	}
	return d, nil
}

// countKeys walks b and counts its keys (bbolt's Bucket.Stats reads the
// committed pages only, not what this transaction changed): for the
// counts of a destination written before they were kept.
func countKeys(b *bolt.Bucket) int64 {
	var n int64
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

// entry is an env value.
type entry struct {
	state   byte
	score   int64
	payload []byte
}

func (e entry) marshal() []byte {
	b := make([]byte, 0, 9+len(e.payload))
	b = append(b, e.state)
	b = binary.BigEndian.AppendUint64(b, uint64(e.score))
	return append(b, e.payload...)
}

func unmarshal(v []byte) (entry, error) {
	if len(v) < 9 {
		return entry{}, errBadEntry
	}
	return entry{state: v[0], score: int64(binary.BigEndian.Uint64(v[1:9])), payload: v[9:]}, nil
}

// load reads id's env entry; ok is false when there is none.
func (d *dest) load(id string) (entry, bool, error) {
	v := d.env.Get([]byte(id))
	if v == nil {
		return entry{}, false, nil
	}
	e, err := unmarshal(v)
	return e, err == nil, err
}

// record reads id's record.
func (d *dest) record(id string) (*sender.Meta, error) {
	return sender.UnmarshalMeta(d.name, id, d.meta.Get([]byte(id)))
}

// setState moves id's env entry to a new state and score, keeping the
// indexes and counts in step.
func (d *dest) setState(id string, old entry, state byte, score int64) error {
	if err := d.index(old.state).Delete(indexKey(old.score, id)); err != nil {
		return err
	}
	if err := d.index(state).Put(indexKey(score, id), nil); err != nil {
		return err
	}
	d.count(old.state, -1)
	d.count(state, 1)
	old.state, old.score = state, score
	return d.env.Put([]byte(id), old.marshal())
}

// put writes a whole envelope in a state: entry, record, log, index.
func (d *dest) put(e *sender.Envelope, m *sender.Meta, state byte, score int64) error {
	id := []byte(e.ID)
	if err := d.index(state).Put(indexKey(score, e.ID), nil); err != nil {
		return err
	}
	d.count(state, 1)
	if err := d.env.Put(id, entry{state: state, score: score, payload: e.Payload}.marshal()); err != nil {
		return err
	}
	if err := d.meta.Put(id, sender.MarshalMeta(m)); err != nil {
		return err
	}
	if len(e.Log) == 0 {
		return d.log.Delete(id)
	}
	return d.log.Put(id, sender.MarshalLog(e.Log))
}

// remove deletes id in every part.
func (d *dest) remove(id string, old entry) error {
	if err := d.index(old.state).Delete(indexKey(old.score, id)); err != nil {
		return err
	}
	d.count(old.state, -1)
	for _, b := range []*bolt.Bucket{d.env, d.meta, d.log} {
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
	}
	return nil
}

// setAside moves an entry that does not decode, in whatever part, to the
// corrupt bucket, dropping its index key k from index.
func (d *dest) setAside(id string, index *bolt.Bucket, k []byte, state byte) error {
	if err := index.Delete(k); err != nil {
		return err
	}
	d.count(state, -1)
	raw := d.env.Get([]byte(id))
	if raw == nil {
		return nil // a stale index entry
	}
	if err := d.corrupt.Put([]byte(d.name+"\x00"+id), append([]byte(nil), raw...)); err != nil {
		return err
	}
	for _, b := range []*bolt.Bucket{d.env, d.meta, d.log} {
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
	}
	return nil
}

func (d *dest) paused() bool { return d.b.Get(pausedKey) != nil }

// pausedBy reads the pause and who made it.
func (d *dest) pausedBy() (bool, string) {
	v := d.b.Get(pausedKey)
	if v == nil {
		return false, ""
	}
	return true, string(v)
}

// update runs fn on name's buckets in a group-committed write, and writes
// the counts back.
func (q *Queue) update(name string, fn func(tx *bolt.Tx, d *dest) error) error {
	return q.write(func(tx *bolt.Tx) error {
		d, err := destOf(tx, name)
		if err != nil {
			return err
		}
		if err := fn(tx, d); err != nil {
			return err
		}
		return d.flush()
	})
}

// view runs fn on name's buckets in a read; d is nil when the store holds
// nothing of name.
func (q *Queue) view(name string, fn func(d *dest) error) error {
	return q.db.View(func(tx *bolt.Tx) error {
		d, err := destOf(tx, name)
		if err != nil {
			return err
		}
		return fn(d)
	})
}

// Enqueue implements sender.Queue.
func (q *Queue) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	m := sender.MetaOf(e)
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
		res = sender.EnqueueResult{State: stateOf('q', d.paused())}
		return d.put(e, m, 'q', ms(e.NextAt))
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
				if err := d.setAside(id, d.leased, k, 'l'); err != nil {
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
				if err := d.setAside(id, d.due, k, 'q'); err != nil {
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
	return sender.Assemble(m, append([]byte(nil), cur.payload...), log), cur, nil
}

// Settle implements sender.Queue.
func (q *Queue) Settle(ctx context.Context, name string, outcomes []sender.Outcome, now time.Time) (int, error) {
	if len(outcomes) == 0 {
		return 0, nil
	}
	skipped := 0
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

// The fields of a redrive's counts.
const (
	rdMoved = iota
	rdDelivered
	rdDeadAgain
	rdSuperseded
	rdAt
)

// redriveCount adds delta to field of redrive id's counts (nothing for
// the "" of an envelope never redriven). Counts written for the first
// time (or again, after a trim) are dated now, in the time index that
// trims them.
func (d *dest) redriveCount(id string, field int, delta int64, now int64) error {
	if id == "" {
		return nil
	}
	v := make([]byte, 40)
	copy(v, d.rdCounts.Get([]byte(id)))
	n := int64(binary.BigEndian.Uint64(v[8*field:]))
	binary.BigEndian.PutUint64(v[8*field:], uint64(n+delta))
	if binary.BigEndian.Uint64(v[8*rdAt:]) == 0 {
		binary.BigEndian.PutUint64(v[8*rdAt:], uint64(now))
		if err := d.rdTimes.Put(indexKey(now, id), nil); err != nil {
			return err
		}
	}
	return d.rdCounts.Put([]byte(id), v)
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
		s.Queued, s.Leased, s.Dead, s.History = int(d.queued), int(d.leasedN), int(d.deadN), int(d.histN)
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

// Dead implements sender.Queue. The cursor is "<dead-at ms>:<id>".
func (q *Queue) Dead(ctx context.Context, name, cursor string, limit int) ([]*sender.Meta, string, error) {
	var start []byte
	if cursor != "" {
		s, id, ok := strings.Cut(cursor, ":")
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil {
			return nil, "", fmt.Errorf("%w: bad cursor %q", sender.ErrBadFilter, cursor)
		}
		start = indexKey(n, id)
	}
	var out []*sender.Meta
	next := ""
	err := q.view(name, func(d *dest) error {
		if d == nil {
			return nil
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
			v := d.meta.Get(k[8:])
			if v == nil {
				continue // a stale index entry
			}
			m, err := sender.UnmarshalMeta(name, string(k[8:]), v)
			if err != nil {
				m = sender.BrokenMeta(name, string(k[8:]), err)
			}
			m.State, m.DeadAt = sender.StateDead, time.UnixMilli(scoreOf(k))
			out = append(out, m)
			if len(out) == limit {
				next = fmt.Sprintf("%d:%s", scoreOf(k), k[8:])
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("bolt dead: %w", err)
	}
	return out, next, nil
}

// Metas implements sender.Queue.
func (q *Queue) Metas(ctx context.Context, name string, ids []string) ([]*sender.Meta, error) {
	var out []*sender.Meta
	err := q.view(name, func(d *dest) error {
		if d == nil {
			return nil
		}
		for _, id := range ids {
			cur, ok, err := d.load(id)
			if err != nil {
				return err
			}
			if !ok {
				m, err := d.deliveredMeta(id)
				if err != nil {
					return err
				}
				if m != nil {
					out = append(out, m)
				}
				continue
			}
			m, err := d.record(id)
			if err != nil {
				m = sender.BrokenMeta(name, id, err)
			}
			m.State = stateOf(cur.state, d.paused())
			if cur.state == 'x' {
				m.DeadAt = time.UnixMilli(cur.score)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt metas: %w", err)
	}
	return out, nil
}

// deliveredMeta is id's record, from the history, if it was delivered;
// nil when it was not.
func (d *dest) deliveredMeta(id string) (*sender.Meta, error) {
	k, h, ok, err := d.history(id)
	if err != nil || !ok || h.state != histDelivered {
		return nil, err
	}
	return h.meta(d.name, k), nil
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

// Redrive implements sender.Queue.
func (q *Queue) Redrive(ctx context.Context, name string, ids []string, redriveID string, now time.Time) ([]string, error) {
	var moved []string
	err := q.update(name, func(_ *bolt.Tx, d *dest) error {
		moved = moved[:0]
		for _, id := range ids {
			cur, ok, err := d.load(id)
			if err != nil {
				return err
			}
			if !ok || cur.state != 'x' {
				continue
			}
			if ok, err = d.redrive(id, cur, redriveID, ms(now)); err != nil {
				return err
			}
			if ok {
				moved = append(moved, id)
			}
		}
		if len(moved) > 0 {
			return d.redriveCount(redriveID, rdMoved, int64(len(moved)), ms(now))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt redrive: %w", err)
	}
	return moved, nil
}

// redrive moves the dead letter id (its entry cur) back to due at now
// under redriveID, and reports whether it did: a record that does not
// decode stays (listed as broken, purgeable; never sent).
func (d *dest) redrive(id string, cur entry, redriveID string, now int64) (bool, error) {
	m, err := d.record(id)
	if err != nil {
		return false, nil
	}
	if m.RedriveID != "" {
		// An earlier redrive's letter that died again: now this one's.
		if err := d.redriveCount(m.RedriveID, rdDeadAgain, -1, now); err != nil {
			return false, err
		}
		if err := d.redriveCount(m.RedriveID, rdSuperseded, 1, now); err != nil {
			return false, err
		}
	}
	m.RedriveID, m.NextAt = redriveID, time.UnixMilli(now)
	if err := d.meta.Put([]byte(id), sender.MarshalMeta(m)); err != nil {
		return false, err
	}
	return true, d.setState(id, cur, 'q', now)
}

// RedriveCounts implements sender.Queue.
func (q *Queue) RedriveCounts(ctx context.Context, name, redriveID string) (sender.RedriveCounts, error) {
	var c sender.RedriveCounts
	err := q.view(name, func(d *dest) error {
		if d == nil {
			return nil
		}
		v := d.rdCounts.Get([]byte(redriveID))
		if len(v) != 40 {
			return nil
		}
		n := func(f int) int { return int(int64(binary.BigEndian.Uint64(v[8*f:]))) }
		c = sender.RedriveCounts{Moved: n(rdMoved), Delivered: n(rdDelivered), DeadAgain: n(rdDeadAgain), Superseded: n(rdSuperseded)}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("bolt redrive counts: %w", err)
	}
	return c, nil
}

// Purge implements sender.Queue.
func (q *Queue) Purge(ctx context.Context, name string, ids []string) (int, error) {
	removed := 0
	err := q.update(name, func(_ *bolt.Tx, d *dest) error {
		removed = 0
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
			if err := d.forgetEntry(id); err != nil {
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

// moveBatch bounds the envelopes one Move transaction looks at, and
// moveBytes the payload bytes it carries (one envelope at least).
const (
	moveBatch = 500
	moveBytes = 4 << 20
)

// Move implements sender.Queue: in transactions of a bounded size, each
// atomic, walking from's envelopes in ID order once; then the history.
// An envelope whose record does not decode, that is leased and live, or
// whose ID to holds with another payload stays in from, counted as kept.
func (q *Queue) Move(ctx context.Context, from, to string, now time.Time) (moved, kept int, err error) {
	if from == to {
		return 0, 0, fmt.Errorf("bolt move: %q to itself", from)
	}
	var after []byte // the last ID looked at: every ID up to it moved or stays
	for {
		var n, k int
		var last []byte
		err := q.write(func(tx *bolt.Tx) error {
			n, k, last = 0, 0, nil
			src, err := destOf(tx, from)
			if err != nil {
				return err
			}
			dst, err := destOf(tx, to)
			if err != nil {
				return err
			}
			ids := src.moveBatch(after)
			if len(ids) == 0 {
				return nil
			}
			last = []byte(ids[len(ids)-1])
			for _, id := range ids {
				ok, err := src.moveOne(dst, id, ms(now))
				if err != nil {
					return err
				}
				if ok {
					n++
				} else {
					k++
				}
			}
			if err := src.flush(); err != nil {
				return err
			}
			return dst.flush()
		})
		if err != nil {
			return moved, kept, fmt.Errorf("bolt move: %w", err)
		}
		moved, kept = moved+n, kept+k
		if last == nil {
			break
		}
		after = last
	}
	// The history goes too: what was delivered under from is found,
	// shown, resent and trimmed under to, and the enqueue stays
	// idempotent under the new name.
	for {
		n := 0
		err := q.write(func(tx *bolt.Tx) error {
			src, err := destOf(tx, from)
			if err != nil {
				return err
			}
			dst, err := destOf(tx, to)
			if err != nil {
				return err
			}
			if n, err = moveHistory(src, dst); err != nil {
				return err
			}
			if err := src.flush(); err != nil {
				return err
			}
			return dst.flush()
		})
		if err != nil {
			return moved, kept, fmt.Errorf("bolt move: what settled: %w", err)
		}
		if n == 0 {
			break
		}
	}
	err = q.write(func(tx *bolt.Tx) error {
		src, err := destOf(tx, from)
		if err != nil {
			return err
		}
		dst, err := destOf(tx, to)
		if err != nil {
			return err
		}
		return src.moveRedriveCounts(dst)
	})
	if err != nil {
		return moved, kept, fmt.Errorf("bolt move: redrive counts: %w", err)
	}
	return moved, kept, nil
}

// moveBatch is the IDs of d's envelopes after after (from the first when
// nil), up to moveBatch of them and moveBytes of their payloads. It reads
// the keys and the values' lengths, never a payload.
func (d *dest) moveBatch(after []byte) []string {
	var ids []string
	size := 0
	c := d.env.Cursor()
	k, v := c.First()
	if after != nil {
		if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	for ; k != nil && len(ids) < moveBatch && (len(ids) == 0 || size < moveBytes); k, v = c.Next() {
		ids = append(ids, string(k))
		size += len(v)
	}
	return ids
}

// moveOne moves the envelope id from d to dst, unless it must stay (see
// Move), and reports whether it went: a queued or leased one is due at
// now in dst, a dead letter stays dead.
func (d *dest) moveOne(dst *dest, id string, now int64) (bool, error) {
	cur, ok, err := d.load(id)
	if err != nil || !ok || (cur.state == 'l' && cur.score > now) {
		return false, nil // does not decode: listed where it is; a live lease: its holder settles it
	}
	m, err := d.record(id)
	if err != nil {
		return false, nil
	}
	log := d.log.Get([]byte(id))
	if _, err := sender.UnmarshalLog(log); err != nil {
		return false, nil
	}
	fp, held, err := dst.holds(id)
	if err != nil {
		return false, err
	}
	if held && fp != m.Fingerprint {
		return false, nil
	}
	if !held {
		state, score := cur.state, cur.score
		if state != 'x' {
			state, score = 'q', now
		}
		m.Destination = dst.name
		if err := dst.index(state).Put(indexKey(score, id), nil); err != nil {
			return false, err
		}
		dst.count(state, 1)
		if err := dst.env.Put([]byte(id), entry{state: state, score: score, payload: cur.payload}.marshal()); err != nil {
			return false, err
		}
		if err := dst.meta.Put([]byte(id), sender.MarshalMeta(m)); err != nil {
			return false, err
		}
		if log != nil {
			if err := dst.log.Put([]byte(id), append([]byte(nil), log...)); err != nil {
				return false, err
			}
		}
	}
	return true, d.remove(id, cur)
}

// moveHistory moves up to moveBatch of src's history entries to dst,
// oldest first, each with its kept payload, unless dst holds a newer
// entry of its ID; it answers how many went from src.
func moveHistory(src, dst *dest) (int, error) {
	var keys [][]byte
	c := src.hist.Cursor()
	for k, _ := c.First(); k != nil && len(keys) < moveBatch; k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		h, err := unmarshalHist(src.hist.Get(k))
		if err == nil && bytes.Equal(src.hidx.Get([]byte(h.id)), k) {
			if err := moveEntry(src, dst, k, h); err != nil {
				return 0, err
			}
		}
		if err := src.hist.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// moveEntry writes src's entry h (key k) and its kept payload in dst,
// unless dst holds a newer entry of its ID, and forgets them in src.
func moveEntry(src, dst *dest, k []byte, h histEntry) error {
	if old := dst.hidx.Get([]byte(h.id)); old == nil || scoreOf(old) < scoreOf(k) {
		if err := dst.addHistory(h.id, h.state, h.rec, h.log, scoreOf(k)); err != nil {
			return err
		}
		if payload, until, ok := src.keptPayload(h.id); ok {
			if err := dst.keepPayload(h.id, payload, until); err != nil {
				return err
			}
		}
	}
	if err := src.forgetHistory(h.id); err != nil {
		return err
	}
	return src.dropPayload(h.id)
}

// holds reports whether d holds id, in any state or delivered, and the
// fingerprint of its payload.
func (d *dest) holds(id string) ([8]byte, bool, error) {
	if v := d.meta.Get([]byte(id)); len(v) >= 9 {
		return [8]byte(v[1:9]), true, nil
	}
	dl, ok, err := d.delivered(id)
	return dl.fp, ok, err
}

// moveRedriveCounts adds d's redrive counts to to's, and forgets them in
// d: the letters they count are to's now.
func (d *dest) moveRedriveCounts(to *dest) error {
	type counts struct{ id, v []byte }
	var all []counts
	if err := d.rdCounts.ForEach(func(k, v []byte) error {
		all = append(all, counts{append([]byte(nil), k...), append([]byte(nil), v...)})
		return nil
	}); err != nil {
		return err
	}
	for _, c := range all {
		if len(c.v) != 40 {
			continue
		}
		at := int64(binary.BigEndian.Uint64(c.v[8*rdAt:]))
		for f := rdMoved; f < rdAt; f++ {
			if n := int64(binary.BigEndian.Uint64(c.v[8*f:])); n != 0 {
				if err := to.redriveCount(string(c.id), f, n, at); err != nil {
					return err
				}
			}
		}
		if err := d.rdTimes.Delete(indexKey(at, string(c.id))); err != nil {
			return err
		}
		if err := d.rdCounts.Delete(c.id); err != nil {
			return err
		}
	}
	return nil
}

// Drop implements sender.Queue.
func (q *Queue) Drop(ctx context.Context, name string) (int, error) {
	n := 0
	err := q.write(func(tx *bolt.Tx) error {
		n = 0
		if err := tx.Bucket(sinceB).Delete([]byte(name)); err != nil {
			return err
		}
		root := tx.Bucket(rootBucket)
		b := root.Bucket([]byte(name))
		if b == nil {
			return nil
		}
		if env := b.Bucket(envB); env != nil {
			n = int(countKeys(env))
		}
		if err := root.DeleteBucket([]byte(name)); err != nil {
			return err
		}
		c := tx.Bucket(corruptB).Cursor()
		prefix := []byte(name + "\x00")
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bolt drop: %w", err)
	}
	return n, nil
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
