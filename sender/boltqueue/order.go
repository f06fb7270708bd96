package boltqueue

// Ordered delivery (sender.Ordering). An entity's unsettled envelopes
// are listed in their destination's ord bucket in the order they joined
// it, its head first; ordi finds an envelope's place there by its ID,
// also when its record no longer decodes. Only the head is in an index:
// due, leased, or dead while it holds its entity; the others wait, in
// state 'w', in none, and nothing leases them. Whatever takes an
// envelope out of its entity (a delivery, a death under on_dead skip, a
// purge, the retention's trim, a Move, an entry set aside) hands the
// entity on to the next (leave).
//
// A destination never ordered has neither bucket, and its operations
// open neither: those of an envelope without an entity never look.

import (
	"bytes"
	"context"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
)

// ordered opens d's ord and ordi buckets, and makes them when create
// (in a write); it reports whether d has them. It looks once per
// transaction.
func (d *dest) ordered(create bool) (bool, error) {
	if d.ord == nil && (!d.ordLooked || create) {
		d.ordLooked = true
		d.ord, d.ordi = d.b.Bucket(ordB), d.b.Bucket(ordiB)
		if d.ord == nil && create {
			var err error
			if d.ord, err = d.b.CreateBucket(ordB); err != nil {
				return false, err
			}
			if d.ordi, err = d.b.CreateBucketIfNotExists(ordiB); err != nil {
				return false, err
			}
		}
	}
	return d.ord != nil, nil
}

// entityPrefix is the prefix of entity's ord keys: its length (2 bytes,
// big-endian; join orders none over sender.MaxEntityLen) and its bytes,
// so that an entity's keys are contiguous and share their prefix with
// no other entity's. Entities are in order of length, then of bytes.
func entityPrefix(entity string) []byte {
	b := make([]byte, 2, 2+len(entity)+8)
	binary.BigEndian.PutUint16(b, uint16(len(entity)))
	return append(b, entity...)
}

// prefixOf is the entity prefix of an ord key.
func prefixOf(k []byte) []byte { return k[:len(k)-8] }

// entityOf is the entity of an ord key.
func entityOf(k []byte) string { return string(k[2 : len(k)-8]) }

// join makes id, written by the caller in the state and score answered,
// the last of entity's envelopes: due at at when it is the entity's head
// (the entity had none), else waiting. An entity over
// sender.MaxEntityLen, which sender.Enqueue refuses (one stored before
// the cap), is not ordered: due at at.
func (d *dest) join(id, entity string, at int64) (state byte, score int64, err error) {
	if sender.CheckEntity(entity) != nil {
		return 'q', at, nil
	}
	if _, err := d.ordered(true); err != nil {
		return 0, 0, err
	}
	prefix := entityPrefix(entity)
	k, _ := d.ord.Cursor().Seek(prefix)
	head := k == nil || !bytes.HasPrefix(k, prefix)
	seq, err := d.ord.NextSequence()
	if err != nil {
		return 0, 0, err
	}
	key := binary.BigEndian.AppendUint64(prefix, seq)
	if err := d.ord.Put(key, []byte(id)); err != nil {
		return 0, 0, err
	}
	if err := d.ordi.Put([]byte(id), key); err != nil {
		return 0, 0, err
	}
	if head {
		return 'q', at, nil
	}
	return 'w', 0, nil
}

// place is where an envelope of entity that comes back into the queue
// (a redrive, a resend, a Move) goes, due at now: first, when it is in
// its entity already (the dead head that held it, held no more); at the
// back of its entity when ordered; else due.
func (d *dest) place(id, entity string, ordered bool, now int64) (state byte, score int64, err error) {
	k, err := d.member(id)
	switch {
	case err != nil:
		return 0, 0, err
	case k != nil:
		d.heldN--
		d.countsChanged = true
		return 'q', now, nil
	case ordered && entity != "":
		return d.join(id, entity, now)
	}
	return 'q', now, nil
}

// member is id's ord key (pointing into the file); nil when id is in no
// entity.
func (d *dest) member(id string) ([]byte, error) {
	ok, err := d.ordered(false)
	if !ok || err != nil {
		return nil, err
	}
	return d.ordi.Get([]byte(id)), nil
}

// isHead reports whether ord key k is its entity's first.
func (d *dest) isHead(k []byte) bool {
	first, _ := d.ord.Cursor().Seek(prefixOf(k))
	return bytes.Equal(first, k)
}

// leave takes id, which was in state was, out of its entity, if it is in
// one; a dead one ('x') held it. When id was the head, the next becomes
// the head, due at its own time, or at now if that passed (one whose
// record does not decode at now: the lease sets it aside, and the next
// goes). A next whose entry is gone is passed over, one that does not
// decode set aside.
func (d *dest) leave(id string, was byte, now int64) error {
	k, err := d.member(id)
	if k == nil || err != nil {
		return err
	}
	k = bytes.Clone(k)
	head := d.isHead(k)
	if err := d.unlist(id, k); err != nil {
		return err
	}
	if was == 'x' {
		d.heldN--
		d.countsChanged = true
	}
	if !head {
		return nil
	}
	prefix := prefixOf(k)
	for {
		k, v := d.ord.Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return nil
		}
		next := string(v)
		cur, ok, err := d.load(next)
		switch {
		case ok && cur.state != 'w':
			return nil // a head already
		case ok:
			at := now
			if m, err := d.record(next); err == nil {
				at = max(ms(m.NextAt), now)
			}
			return d.setState(next, cur, 'q', at)
		case err != nil:
			d.count('w', -1)
			if err := d.discard(next); err != nil {
				return err
			}
		}
		if err := d.unlist(next, bytes.Clone(k)); err != nil {
			return err
		}
	}
}

// unlist deletes id's place k in ord.
func (d *dest) unlist(id string, k []byte) error {
	if err := d.ord.Delete(k); err != nil {
		return err
	}
	return d.ordi.Delete([]byte(id))
}

// hold counts id's entity held, when id, dead now, is in one (its head):
// under on_dead hold it stays, and the others wait behind it.
func (d *dest) hold(id string) error {
	k, err := d.member(id)
	if k != nil {
		d.heldN++
		d.countsChanged = true
	}
	return err
}

// pendingWaiting appends to out dest's waiting envelopes f matches,
// entity by entity, each after its head, with Behind and Held, until out
// holds limit or looked reaches sender.MaxPendingScan; it answers out.
func (d *dest) pendingWaiting(ctx context.Context, f sender.PendingFilter, out []*sender.Meta, looked, limit int) ([]*sender.Meta, error) {
	if ok, err := d.ordered(false); !ok || err != nil {
		return out, err
	}
	c := d.ord.Cursor()
	k, v := c.First()
	if f.Entity != "" {
		k, v = c.Seek(entityPrefix(f.Entity))
	}
	var head []byte // the current entity's first key
	var headID string
	held := false
	for ; k != nil && len(out) < limit && looked < sender.MaxPendingScan; k, v = c.Next() {
		if head == nil || !bytes.Equal(prefixOf(k), prefixOf(head)) {
			if f.Entity != "" && entityOf(k) != f.Entity {
				break
			}
			head, headID = k, string(v)
			cur, ok, _ := d.load(headID)
			held = ok && cur.state == 'x'
			continue
		}
		looked++
		if err := ctx.Err(); err != nil {
			return out, err
		}
		id := string(v)
		raw := d.meta.Get(v)
		if raw == nil {
			continue // its entry is gone
		}
		m, err := sender.UnmarshalMeta(d.name, id, raw)
		if err != nil {
			m = sender.BrokenMeta(d.name, id, err)
		}
		if !f.Match(m) {
			continue
		}
		m.State, m.Behind, m.Held = sender.StateQueued, headID, held
		out = append(out, m)
	}
	return out, nil
}

// moveEntities is Move's first part: it carries from's entities to to,
// in transactions of a bounded size, each entity's envelopes in their
// order, each from its entity's head (its leave makes the next the
// head), so that from's entities are whole between two transactions and
// after a Move cut short. When one stays (see Move), the envelopes
// behind it stay too, counted kept: moved, they would overtake it.
// Moved, they join their entity in to when ordered (into, else they are
// due at now); a dead head stays dead, its entity no longer held.
func (q *Queue) moveEntities(from, to string, now int64, into bool) (moved, kept int, err error) {
	var after []byte // the last ord key looked at
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
			if ok, err := src.ordered(false); !ok || err != nil {
				return err
			}
			keys, ids := src.entityBatch(after)
			if len(keys) == 0 {
				return nil
			}
			last = keys[len(keys)-1]
			for i, key := range keys {
				if src.ord.Get(key) == nil {
					continue // set aside by the leave of the one before
				}
				if !src.isHead(key) {
					k++ // behind one that stays
					continue
				}
				ok, err := src.moveOne(dst, ids[i], now, into)
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
			return moved, kept, err
		}
		moved, kept = moved+n, kept+k
		if last == nil {
			return moved, kept, nil
		}
		after = last
	}
}

// entityBatch is d's ord keys after after (from the first when nil), and
// their IDs, up to moveBatch of them and moveBytes of their payloads.
func (d *dest) entityBatch(after []byte) (keys [][]byte, ids []string) {
	size := 0
	c := d.ord.Cursor()
	k, v := c.First()
	if after != nil {
		if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	for ; k != nil && len(keys) < moveBatch && (len(keys) == 0 || size < moveBytes); k, v = c.Next() {
		keys = append(keys, bytes.Clone(k))
		ids = append(ids, string(v))
		size += len(d.env.Get(v))
	}
	return keys, ids
}
