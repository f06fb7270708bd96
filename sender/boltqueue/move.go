package boltqueue

// Renames: Move carries a destination's envelopes, history and redrive
// counts to another name; Drop forgets an orphan.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
)

// moveBatch bounds the envelopes one Move transaction looks at (a var,
// for the tests of a Move in several), and moveBytes the payload bytes
// it carries (one envelope at least).
var moveBatch = 500

const moveBytes = 4 << 20

// Move implements sender.Queue: in transactions of a bounded size, each
// atomic, walking from's entities in their order (moveEntities), then
// its other envelopes in ID order, once; then the history. An envelope
// whose record does not decode, that is leased and live, or whose ID to
// holds with another payload stays in from, counted as kept, and so do
// the envelopes of its entity behind it.
func (q *Queue) Move(ctx context.Context, from, to string, now time.Time) (moved, kept int, err error) {
	if from == to {
		return 0, 0, fmt.Errorf("bolt move: %q to itself", from)
	}
	into := q.orderOf(to).ByEntity
	if moved, kept, err = q.moveEntities(from, to, ms(now), into); err != nil {
		return moved, kept, fmt.Errorf("bolt move: %w", err)
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
				place, err := src.member(id)
				if err != nil {
					return err
				}
				if place != nil {
					continue // its entity's: moveEntities counted it kept
				}
				ok, err := src.moveOne(dst, id, ms(now), into)
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
// Move), and reports whether it went: a queued, waiting or leased one is
// due at now in dst, at the back of its entity when into (dst is
// ordered); a dead letter stays dead. It leaves its entity in d.
func (d *dest) moveOne(dst *dest, id string, now int64, into bool) (bool, error) {
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
			if state, score, err = dst.place(id, m.Entity, into, now); err != nil {
				return false, err
			}
		}
		m.Destination = dst.name
		if ix := dst.index(state); ix != nil {
			if err := ix.Put(indexKey(score, id), nil); err != nil {
				return false, err
			}
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
	if err := d.remove(id, cur); err != nil {
		return false, err
	}
	return true, d.leave(id, cur.state, now)
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
