package boltqueue

// The delivery history (issue 19): what settled, in the hist, hidx, hpay
// and hpayt buckets (the layout is in layout.go), trimmed by Settle and,
// when due with no traffic, by TrimHistory.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/wire"
	"github.com/hookgate/hookgate/sender"
)

// A history entry's states.
const (
	histDelivered = 'd'
	histDead      = 'x'
)

// historyScan bounds the entries one History call looks at.
const historyScan = 1000

var errBadHistory = errors.New("malformed stored history entry")

// KeepHistory sets how long q keeps what settled: entries for h.Keep (the
// retention when zero), a delivered payload for h.Payload (0: not kept),
// at most h.Keep. Call it before q is used.
func (q *Queue) KeepHistory(h sender.History) {
	if h.Keep <= 0 {
		h.Keep = q.retention
	}
	h.Payload = min(max(h.Payload, 0), h.Keep)
	q.history = h
}

// histEntry is a hist value; rec and log point into the file, valid for
// the transaction.
type histEntry struct {
	state    byte
	id       string
	rec, log []byte
}

func histKey(at int64, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(at)), seq)
}

// position is a hist key as a sender.Meta.HistoryID: "<settled ms>-<sequence>".
func position(k []byte) string {
	return strconv.FormatInt(scoreOf(k), 10) + "-" + strconv.FormatUint(binary.BigEndian.Uint64(k[8:]), 10)
}

// parsePosition is the hist key of a position.
func parsePosition(p string) ([]byte, error) {
	a, b, ok := strings.Cut(p, "-")
	at, err := strconv.ParseInt(a, 10, 64)
	seq, serr := strconv.ParseUint(b, 10, 64)
	if !ok || err != nil || serr != nil || at <= 0 {
		return nil, fmt.Errorf("%w: bad cursor %q", sender.ErrBadFilter, p)
	}
	return histKey(at, seq), nil
}

func (h histEntry) marshal() []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(h.id)+len(h.rec)+len(h.log))
	b = append(b, h.state)
	b = wire.AppendString(b, h.id)
	b = binary.AppendUvarint(b, uint64(len(h.rec)))
	b = append(b, h.rec...)
	return append(b, h.log...)
}

func unmarshalHist(v []byte) (histEntry, error) {
	if len(v) < 1 || (v[0] != histDelivered && v[0] != histDead) {
		return histEntry{}, errBadHistory
	}
	d := wire.Decoder{Buf: v[1:]}
	h := histEntry{state: v[0], id: d.LenString()}
	n := d.Uvarint()
	// A record holds at least its version and fingerprint.
	if d.Err || n < 9 || n > uint64(len(d.Buf)) {
		return histEntry{}, errBadHistory
	}
	h.rec, h.log = d.Buf[:n], d.Buf[n:]
	return h, nil
}

// fingerprint is the entry's payload fingerprint (sender.MarshalMeta puts
// it after the version byte).
func (h histEntry) fingerprint() [8]byte { return [8]byte(h.rec[1:9]) }

// meta decodes the entry's record as History and Metas list it, at its
// position k: settled (delivered, or dead) at the time k holds.
func (h histEntry) meta(dest string, k []byte) *sender.Meta {
	m, err := sender.UnmarshalMeta(dest, h.id, h.rec)
	if err != nil {
		m = sender.BrokenMeta(dest, h.id, err)
	}
	m.State, m.SettledAt, m.HistoryID = sender.StateDelivered, time.UnixMilli(scoreOf(k)), position(k)
	if h.state == histDead {
		m.State, m.DeadAt = sender.StateDead, m.SettledAt
	}
	return m
}

// historyRecord encodes m as the history keeps it: without its trace
// context, which served its deliveries (a resend starts a trace of its
// own), as the Redis queue keeps it.
func historyRecord(m sender.Meta) []byte {
	m.TraceParent, m.TraceState = "", ""
	return sender.MarshalMeta(&m)
}

// history reads id's entry and its key; ok is false when there is none.
func (d *dest) history(id string) (k []byte, h histEntry, ok bool, err error) {
	k = d.hidx.Get([]byte(id))
	if k == nil {
		return nil, histEntry{}, false, nil
	}
	v := d.hist.Get(k)
	if v == nil {
		return nil, histEntry{}, false, nil // a stale index entry
	}
	h, err = unmarshalHist(v)
	return k, h, err == nil, err
}

// delivery is when an ID was last delivered, and its payload's
// fingerprint.
type delivery struct {
	fp [8]byte
	at int64
}

// delivered reads id's delivery, from the history.
func (d *dest) delivered(id string) (delivery, bool, error) {
	k, h, ok, err := d.history(id)
	if err != nil || !ok || h.state != histDelivered {
		return delivery{}, false, err
	}
	return delivery{fp: h.fingerprint(), at: scoreOf(k)}, true, nil
}

// addHistory writes id's entry, settled at at, in place of any earlier
// one and the payload kept with it.
func (d *dest) addHistory(id string, state byte, rec, log []byte, at int64) error {
	if old := d.hidx.Get([]byte(id)); old != nil {
		if err := d.hist.Delete(old); err != nil {
			return err
		}
	} else {
		d.histN++
		d.countsChanged = true
	}
	if err := d.dropPayload(id); err != nil {
		return err
	}
	seq, err := d.hist.NextSequence()
	if err != nil {
		return err
	}
	k := histKey(at, seq)
	if err := d.hist.Put(k, histEntry{state: state, id: id, rec: rec, log: log}.marshal()); err != nil {
		return err
	}
	return d.hidx.Put([]byte(id), k)
}

// forgetHistory deletes id's hidx key, counted.
func (d *dest) forgetHistory(id string) error {
	if d.hidx.Get([]byte(id)) == nil {
		return nil
	}
	d.histN--
	d.countsChanged = true
	return d.hidx.Delete([]byte(id))
}

// keepPayload keeps payload, id's delivered one, until until.
func (d *dest) keepPayload(id string, payload []byte, until int64) error {
	if err := d.hpayt.Put(indexKey(until, id), nil); err != nil {
		return err
	}
	v := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint64(v, uint64(until))
	return d.hpay.Put([]byte(id), append(v, payload...))
}

// keptPayload reads id's kept payload (pointing into the file) and until
// when it is kept; ok is false when there is none.
func (d *dest) keptPayload(id string) (payload []byte, until int64, ok bool) {
	v := d.hpay.Get([]byte(id))
	if len(v) < 8 {
		return nil, 0, false
	}
	return v[8:], scoreOf(v), true
}

// dropPayload deletes id's kept payload, if any.
func (d *dest) dropPayload(id string) error {
	_, until, ok := d.keptPayload(id)
	if !ok {
		return nil
	}
	if err := d.hpayt.Delete(indexKey(until, id)); err != nil {
		return err
	}
	return d.hpay.Delete([]byte(id))
}

// fromHistory assembles id's delivered envelope from its entry, its
// payload while kept at now: ErrNotFound unless its entry is a delivery.
func (d *dest) fromHistory(id string, now int64) (*sender.Envelope, error) {
	_, h, ok, err := d.history(id)
	if err != nil {
		return nil, err
	}
	if !ok || h.state != histDelivered {
		return nil, sender.ErrNotFound
	}
	m, err := sender.UnmarshalMeta(d.name, id, h.rec)
	if err != nil {
		return nil, err
	}
	log, err := sender.UnmarshalLog(h.log)
	if err != nil {
		return nil, err
	}
	payload, until, kept := d.keptPayload(id)
	kept = kept && until >= now
	if kept {
		payload = append([]byte{}, payload...)
	} else {
		payload = nil
	}
	e, err := sender.Assemble(m, payload, log)
	if err != nil {
		return nil, err
	}
	e.PayloadExpired = !kept
	return e, nil
}

// trimHistory forgets entries settled before now-keep, and payloads kept
// until before now, a bounded number of each.
func (d *dest) trimHistory(now int64, keep time.Duration) error {
	cutoff := now - keep.Milliseconds()
	var old [][]byte
	c := d.hist.Cursor()
	for k, _ := c.First(); k != nil && len(old) < trimBatch && scoreOf(k) < cutoff; k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		h, err := unmarshalHist(d.hist.Get(k))
		if err := d.hist.Delete(k); err != nil {
			return err
		}
		if err != nil || !bytes.Equal(d.hidx.Get([]byte(h.id)), k) {
			continue // its ID unknown, or settled again since
		}
		if err := d.forgetHistory(h.id); err != nil {
			return err
		}
		if err := d.dropPayload(h.id); err != nil {
			return err
		}
	}
	old = old[:0]
	c = d.hpayt.Cursor()
	for k, _ := c.First(); k != nil && len(old) < trimBatch && scoreOf(k) < now; k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if _, until, ok := d.keptPayload(string(k[8:])); ok && until == scoreOf(k) {
			if err := d.hpay.Delete(k[8:]); err != nil {
				return err
			}
		}
		if err := d.hpayt.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// History implements sender.Queue: it walks hist from its newest key,
// or from below the cursor's, up to historyScan entries. A limit under 1
// is 100, as on Redis.
func (q *Queue) History(ctx context.Context, name string, f sender.HistoryFilter, cursor string, limit int) ([]*sender.Meta, string, error) {
	if limit <= 0 {
		limit = 100
	}
	// The walk looks at the keys below upper, newest first.
	var upper []byte
	if cursor != "" {
		k, err := parsePosition(cursor)
		if err != nil {
			return nil, "", err
		}
		upper = k
	}
	if !f.Until.IsZero() {
		if k := histKey(f.Until.UnixMilli()+1, 0); upper == nil || bytes.Compare(k, upper) < 0 {
			upper = k
		}
	}
	var out []*sender.Meta
	next := ""
	err := q.view(name, func(d *dest) error {
		if d == nil {
			return nil
		}
		if ids := f.Lookup(); ids != nil {
			var found []*sender.Meta
			for _, id := range ids {
				k, h, ok, err := d.history(id)
				if err != nil {
					return err
				}
				if ok && (upper == nil || bytes.Compare(k, upper) < 0) {
					found = append(found, h.meta(name, k))
				}
			}
			out, next = sender.LookupPage(found, f, "", limit)
			return nil
		}
		c := d.hist.Cursor()
		var last []byte
		seen := 0
		for k, v := below(c, upper); k != nil; k, v = c.Prev() {
			if !f.Since.IsZero() && scoreOf(k) < f.Since.UnixMilli() {
				return nil // nothing older matches
			}
			if len(out) == limit || seen == historyScan {
				next = position(last)
				return nil
			}
			seen++
			last = k
			h, err := unmarshalHist(v)
			if err != nil {
				continue // no ID to list it under; trimmed in its time
			}
			if m := h.meta(name, k); f.Match(m) {
				out = append(out, m)
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("bolt history: %w", err)
	}
	return out, next, nil
}

// below moves c to the last key below upper (the last key when upper is
// nil).
func below(c *bolt.Cursor, upper []byte) (k, v []byte) {
	if upper == nil {
		return c.Last()
	}
	if k, _ := c.Seek(upper); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// Resend implements sender.Queue.
func (q *Queue) Resend(ctx context.Context, name string, ids []string, redriveID string, now time.Time) ([]string, error) {
	var moved []string
	ordered := q.orderOf(name).ByEntity
	err := q.update(name, func(_ *bolt.Tx, d *dest) error {
		moved = moved[:0]
		for _, id := range ids {
			ok, err := d.resend(id, redriveID, ordered, ms(now))
			if err != nil {
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
		return nil, fmt.Errorf("bolt resend: %w", err)
	}
	return moved, nil
}

// resend moves id back to due at now under redriveID, and reports whether
// it did: a dead letter as Redrive moves it; a delivered envelope while
// its payload is kept, the payload going back into the queue (at the
// back of its entity when ordered). Its entry stays, until it settles
// again.
func (d *dest) resend(id, redriveID string, ordered bool, now int64) (bool, error) {
	cur, ok, err := d.load(id)
	if err != nil {
		return false, err
	}
	if ok {
		if cur.state != 'x' {
			return false, nil
		}
		return d.redrive(id, cur, redriveID, ordered, now)
	}
	_, h, ok, err := d.history(id)
	if err != nil || !ok || h.state != histDelivered {
		return false, err
	}
	payload, until, kept := d.keptPayload(id)
	if !kept || until < now {
		return false, nil
	}
	m, err := sender.UnmarshalMeta(d.name, id, h.rec)
	if err != nil {
		return false, nil // listed as broken; never sent
	}
	log, err := sender.UnmarshalLog(h.log)
	if err != nil {
		return false, nil
	}
	e, err := sender.Assemble(m, payload, log)
	if err != nil {
		return false, nil
	}
	sender.Redriven(e, redriveID, time.UnixMilli(now))
	m.RedriveID, m.NextAt = e.RedriveID, e.NextAt
	state, score, err := d.place(id, m.Entity, ordered, now)
	if err != nil {
		return false, err
	}
	if err := d.put(e, m, state, score); err != nil {
		return false, err
	}
	return true, d.dropPayload(id)
}

// forgetEntry deletes id's history entry, and any payload kept with it.
func (d *dest) forgetEntry(id string) error {
	if k := d.hidx.Get([]byte(id)); k != nil {
		if err := d.hist.Delete(k); err != nil {
			return err
		}
	}
	if err := d.forgetHistory(id); err != nil {
		return err
	}
	return d.dropPayload(id)
}

// historyDue is when the next of d's history is due for the trim: its
// oldest entry, or its soonest payload (0: nothing will be).
func (d *dest) historyDue(keep time.Duration) int64 {
	var next int64
	if k, _ := d.hist.Cursor().First(); k != nil {
		next = scoreOf(k) + keep.Milliseconds() + 1
	}
	if k, _ := d.hpayt.Cursor().First(); k != nil && (next == 0 || scoreOf(k)+1 < next) {
		next = scoreOf(k) + 1
	}
	return next
}

// TrimHistory implements sender.Queue: a read finds what is due, and only
// then a write trims it.
func (q *Queue) TrimHistory(ctx context.Context, name string, now time.Time) (time.Time, error) {
	var next int64
	err := q.view(name, func(d *dest) error {
		if d != nil {
			next = q.trimDue(d)
		}
		return nil
	})
	if err == nil && next != 0 && next <= ms(now) {
		err = q.update(name, func(_ *bolt.Tx, d *dest) error {
			if err := q.trim(d, now); err != nil {
				return err
			}
			next = q.trimDue(d)
			return nil
		})
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("bolt trim history: %w", err)
	}
	if next == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(next), nil
}

// trimDue is when d's next history entry, payload or dead letter is due
// to go (0: none will be).
func (q *Queue) trimDue(d *dest) int64 {
	var next int64
	if d.hist != nil {
		next = d.historyDue(q.history.Keep)
	}
	if d.dead == nil {
		return next
	}
	if k, _ := d.dead.Cursor().First(); k != nil {
		if due := scoreOf(k) + q.retention.Milliseconds(); next == 0 || due < next {
			next = due
		}
	}
	return next
}

// now is the clock a kept payload's time is judged by when a call brings
// none (Get).
func (q *Queue) now() time.Time {
	if q.history.Now != nil {
		return q.history.Now()
	}
	return time.Now()
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
