package boltqueue

// Dead letters: the list, the records a scan reads, redrive and its
// counts, purge and the redrive audit.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
)

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
		var err error
		out, err = d.metas(name, ids)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bolt metas: %w", err)
	}
	return out, nil
}

// MetasAcross implements sender.Queue: one read transaction.
func (q *Queue) MetasAcross(_ context.Context, dests []string, id string) ([]*sender.Meta, error) {
	out := make([]*sender.Meta, len(dests))
	err := q.db.View(func(tx *bolt.Tx) error {
		for i, name := range dests {
			d, err := destOf(tx, name)
			if err != nil {
				return err
			}
			ms, err := d.metas(name, []string{id})
			if err != nil {
				return err
			}
			if len(ms) > 0 {
				out[i] = ms[0]
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt metas: %w", err)
	}
	return out, nil
}

// metas is Metas within a transaction; d nil holds nothing.
func (d *dest) metas(name string, ids []string) ([]*sender.Meta, error) {
	if d == nil {
		return nil, nil
	}
	var out []*sender.Meta
	for _, id := range ids {
		cur, ok, err := d.load(id)
		if err != nil {
			return nil, err
		}
		if !ok {
			m, err := d.deliveredMeta(id)
			if err != nil {
				return nil, err
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
	return out, nil
}

// Redrive implements sender.Queue.
func (q *Queue) Redrive(ctx context.Context, name string, ids []string, redriveID string, now time.Time) ([]string, error) {
	var moved []string
	ordered := q.orderOf(name).ByEntity
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
			if ok, err = d.redrive(id, cur, redriveID, ordered, ms(now)); err != nil {
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
// decode stays (listed as broken, purgeable; never sent). The head that
// held its entity goes first; another letter of an entity joins its back
// when ordered (place).
func (d *dest) redrive(id string, cur entry, redriveID string, ordered bool, now int64) (bool, error) {
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
	state, score, err := d.place(id, m.Entity, ordered, now)
	if err != nil {
		return false, err
	}
	return true, d.setState(id, cur, state, score)
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

// Purge implements sender.Queue. A purged head that held its entity lets
// the next go, due by the queue's clock.
func (q *Queue) Purge(ctx context.Context, name string, ids []string) (int, error) {
	removed := 0
	now := ms(q.now())
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
			if err := d.leave(id, cur.state, now); err != nil {
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
