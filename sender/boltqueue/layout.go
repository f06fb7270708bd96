package boltqueue

// The file's layout: the buckets, their version, one destination's
// buckets (dest) and the codec of its env entries.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
)

// The layout: a bucket "sender", in it a bucket per destination, holding
//
//	env      id -> state byte (q due, l leased, x dead, w waiting behind
//	         its entity's head) | score (8 bytes, big-endian unix ms: due,
//	         lease end or dead-at; 0 while waiting) | payload
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
//	ord      entity length (2, big-endian) | entity | sequence (8, the
//	         bucket's NextSequence) -> id: each entity's unsettled
//	         envelopes (sender.Ordering), its head first (order.go)
//	ordi     id -> its ord key
//	counts   (a key) queued (due), leased, dead, history entries, then
//	         waiting and held entities (8 bytes each), kept with the
//	         indexes, so that Stats walks nothing
//	paused   (a key) who paused it, present while the destination is paused
//
// where a string is a uvarint length and its bytes. A delivered ID is a
// duplicate for the enqueue while its hist entry is within History.Keep;
// hist, hidx and hpay are trimmed by Settle, a bounded number at a time.
//
// Ordering came within version 3, and leaves a file that never used it
// as it was: ord and ordi are made by a destination's first ordered
// envelope, and counts is written 32 bytes long (its first four) while
// nothing waits and no entity is held; 32 bytes read as none waiting or
// held. An earlier hookgate reads such a file; one that holds waiting
// envelopes or held entities it misreads (its counts, state 'w'): drain
// ordered destinations before going back to it.
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
	ordB       = []byte("ord")
	ordiB      = []byte("ordi")
	countsKey  = []byte("counts")
	pausedKey  = []byte("paused")
	// subBuckets are a destination's buckets, the newest last: a
	// destination that lacks the last lacks some. ord and ordi are not
	// among them: made when first needed (dest.ordered), they are opened
	// by the operations of ordered envelopes alone.
	subBuckets = [][]byte{envB, metaB, logB, dueB, leasedB, deadB, rdCountsB, rdTimesB, histB, hidxB, hpayB, hpaytB}

	errBadEntry = errors.New("malformed stored envelope entry")
)

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
	ord, ordi               *bolt.Bucket // nil until dest.ordered opens them
	ordLooked               bool         // dest.ordered looked for them
	queued, leasedN, deadN  int64        // the counts, as read
	histN                   int64        // hidx's keys: the history's entries
	waitingN, heldN         int64
	countsChanged           bool
}

// index is the index of state's envelopes; nil for the waiting, which
// are in none (ord lists them).
func (d *dest) index(state byte) *bolt.Bucket {
	switch state {
	case 'q':
		return d.due
	case 'l':
		return d.leased
	case 'w':
		return nil
	}
	return d.dead
}

func (d *dest) count(state byte, delta int64) {
	switch state {
	case 'q':
		d.queued += delta
	case 'l':
		d.leasedN += delta
	case 'w':
		d.waitingN += delta
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
	v := make([]byte, 0, 48)
	for _, n := range []int64{d.queued, d.leasedN, d.deadN, d.histN} {
		v = binary.BigEndian.AppendUint64(v, uint64(max(n, 0)))
	}
	if d.waitingN > 0 || d.heldN > 0 {
		v = binary.BigEndian.AppendUint64(v, uint64(max(d.waitingN, 0)))
		v = binary.BigEndian.AppendUint64(v, uint64(max(d.heldN, 0)))
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
	if v := b.Get(countsKey); len(v) == 32 || len(v) == 48 {
		d.queued = int64(binary.BigEndian.Uint64(v))
		d.leasedN = int64(binary.BigEndian.Uint64(v[8:]))
		d.deadN = int64(binary.BigEndian.Uint64(v[16:]))
		d.histN = int64(binary.BigEndian.Uint64(v[24:]))
		if len(v) == 48 {
			d.waitingN = int64(binary.BigEndian.Uint64(v[32:]))
			d.heldN = int64(binary.BigEndian.Uint64(v[40:]))
		}
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
	if ix := d.index(old.state); ix != nil {
		if err := ix.Delete(indexKey(old.score, id)); err != nil {
			return err
		}
	}
	if ix := d.index(state); ix != nil {
		if err := ix.Put(indexKey(score, id), nil); err != nil {
			return err
		}
	}
	d.count(old.state, -1)
	d.count(state, 1)
	old.state, old.score = state, score
	return d.env.Put([]byte(id), old.marshal())
}

// put writes a whole envelope in a state: entry, record, log, index.
func (d *dest) put(e *sender.Envelope, m *sender.Meta, state byte, score int64) error {
	id := []byte(e.ID)
	if ix := d.index(state); ix != nil {
		if err := ix.Put(indexKey(score, e.ID), nil); err != nil {
			return err
		}
	}
	d.count(state, 1)
	if err := d.env.Put(id, entry{state: state, score: score, payload: sender.StoredPayload(e)}.marshal()); err != nil {
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
	if ix := d.index(old.state); ix != nil {
		if err := ix.Delete(indexKey(old.score, id)); err != nil {
			return err
		}
	}
	d.count(old.state, -1)
	for _, b := range []*bolt.Bucket{d.env, d.meta, d.log} {
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
	}
	return nil
}

// setAside moves an entry of state that does not decode, in whatever
// part, to the corrupt bucket, dropping its index key k; its entity, if
// it heads one, goes on with the next (leave), due by now.
func (d *dest) setAside(id string, k []byte, state byte, now int64) error {
	if err := d.index(state).Delete(k); err != nil {
		return err
	}
	d.count(state, -1)
	if err := d.discard(id); err != nil {
		return err
	}
	return d.leave(id, state, now)
}

// discard moves id's env entry as stored to the corrupt bucket, and
// deletes id in every part; nothing when the entry is gone (a stale
// index entry).
func (d *dest) discard(id string) error {
	raw := d.env.Get([]byte(id))
	if raw == nil {
		return nil
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
