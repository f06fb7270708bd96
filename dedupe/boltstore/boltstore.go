// Package boltstore is the embedded dedupe.Store: one bbolt file, every
// change one transaction, durable (fsync) before it returns, concurrent
// writes group-committed (internal/boltcommit). A replay or an in-flight
// answer is read in a read-only transaction and never writes. Expired
// entries are absent at once and purged in the background.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/boltcommit"
)

// Buckets: entries by key, and an expiry index whose keys are the 8-byte
// big-endian expiry (unix ms) followed by the entry key, so the purge walks
// the expired ones in order.
var (
	entriesBucket = []byte("dedupe")
	expiryBucket  = []byte("dedupe_expiry")
)

// expiring pairs each bucket whose entries expire with its expiry index.
var expiring = [][2][]byte{
	{entriesBucket, expiryBucket},
	{entitiesBucket, entityExpiryBucket},
}

// Entry states as stored: claimed, claimed over an expired lease (so a
// retried claim answers as the first did), recorded.
const (
	stateClaimed  = 'c'
	stateTookOver = 't'
	stateRecorded = 'r'
)

// entry is an entry as stored: state byte (above),
// 32-byte fingerprint, lease-until and expiry (unix ms, 8 bytes each,
// big-endian), token (1-byte length and bytes), then the record
// (dedupe.MarshalRecord) to the end. As read, Token and Record are the
// transaction's bytes: valid only until it ends, and never written to.
type entry struct {
	State       byte
	Fingerprint dedupe.Fingerprint
	Token       []byte
	LeaseUntil  int64 // unix ms, claimed only
	Expires     int64 // unix ms
	Record      []byte
}

func (e *entry) claimed() bool { return e.State == stateClaimed || e.State == stateTookOver }

const entryHeader = 1 + 32 + 8 + 8 + 1

var errLongToken = errors.New("token over 255 bytes")

// appendEntry appends the stored form of an entry to b.
func appendEntry(b []byte, state byte, fp *dedupe.Fingerprint, token string, leaseUntil, expires int64, record []byte) []byte {
	b = append(b, state)
	b = append(b, fp[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(leaseUntil))
	b = binary.BigEndian.AppendUint64(b, uint64(expires))
	b = append(b, byte(len(token)))
	b = append(b, token...)
	return append(b, record...)
}

// decodeEntry reads a stored entry; ok is false when it is malformed.
func decodeEntry(b []byte) (e entry, ok bool) {
	if len(b) < entryHeader || int(b[entryHeader-1]) > len(b)-entryHeader {
		return entry{}, false
	}
	e.State = b[0]
	e.Fingerprint = dedupe.Fingerprint(b[1:33])
	e.LeaseUntil = int64(binary.BigEndian.Uint64(b[33:41]))
	e.Expires = int64(binary.BigEndian.Uint64(b[41:49]))
	n := int(b[49])
	e.Token = b[entryHeader : entryHeader+n : entryHeader+n]
	e.Record = b[entryHeader+n:]
	return e, true
}

var errMalformed = errors.New("malformed entry")

// Store is a dedupe.Store on a bbolt file.
type Store struct {
	db     *bolt.DB
	commit *boltcommit.Committer // group-commits the writes
	now    func() time.Time
	logger *slog.Logger
	stop   chan struct{}
	done   sync.WaitGroup
}

// Options tune a Store.
type Options struct {
	// PurgeEvery is the interval of the background purge. Default 1m.
	PurgeEvery time.Duration
	// Now is the purge's clock. Default time.Now.
	Now func() time.Time
	// Logger logs purge failures. Default slog.Default().
	Logger *slog.Logger
}

// New returns a Store on db, creating its buckets, and starts the purge.
// Close stops the purge; the caller closes db.
func New(db *bolt.DB, opts Options) (*Store, error) {
	if opts.PurgeEvery == 0 {
		opts.PurgeEvery = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	err := db.Update(func(tx *bolt.Tx) error {
		for _, pair := range expiring {
			for _, b := range pair {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
		}
		_, err := tx.CreateBucketIfNotExists(keptBucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating buckets: %w", err)
	}
	s := &Store{db: db, commit: boltcommit.New(db), now: opts.Now, logger: opts.Logger, stop: make(chan struct{})}
	s.done.Go(func() { s.purgeLoop(opts.PurgeEvery) })
	return s, nil
}

// Close stops the background purge.
func (s *Store) Close() error {
	close(s.stop)
	s.done.Wait()
	return nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// keyBuf holds a key on the stack for bbolt's Get, Put and Delete, which
// do not keep it (Put copies it); a longer key is appended past it, to the
// heap.
type keyBuf [128]byte

// stored reads key's entry as stored, expired or not: found is false when
// there is none, ok false when it is malformed.
func stored(tx *bolt.Tx, key string) (e entry, found, ok bool) {
	var kb keyBuf
	v := tx.Bucket(entriesBucket).Get(append(kb[:0], key...))
	if v == nil {
		return entry{}, false, true
	}
	e, ok = decodeEntry(v)
	return e, ok, ok
}

// load reads key's live entry: found is false when there is none, or it
// has expired at now.
func load(tx *bolt.Tx, key string, now time.Time) (e entry, found bool, err error) {
	e, found, ok := stored(tx, key)
	if !ok {
		return entry{}, false, errMalformed
	}
	if !found || e.Expires <= ms(now) {
		return entry{}, false, nil
	}
	return e, true, nil
}

func expiryKey(exp int64, key string) []byte {
	return appendExpiryKey(make([]byte, 0, 8+len(key)), exp, key)
}

func appendExpiryKey(b []byte, exp int64, key string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(exp))
	return append(b, key...)
}

// put writes an entry under key, keeping the expiry index in step with
// the expiry of the entry it replaces (oldExpires, when hadOld). bbolt
// holds the value until the commit, and its Put and Delete let the keys
// escape (to its debug log), so keys and value share one allocation.
func put(tx *bolt.Tx, key string, oldExpires int64, hadOld bool, state byte, fp *dedupe.Fingerprint, token string, leaseUntil, expires int64, record []byte) error {
	if len(token) > 255 {
		return errLongToken
	}
	moved := hadOld && oldExpires != expires
	n := 8 + 2*len(key) + entryHeader + len(token) + len(record)
	if moved {
		n += 8 + len(key)
	}
	buf := make([]byte, 0, n)
	idx := tx.Bucket(expiryBucket)
	// The index is written in expiry order: filled pages, not half-filled.
	idx.FillPercent = expiryFillPercent
	if moved {
		buf = appendExpiryKey(buf, oldExpires, key)
		if err := idx.Delete(buf); err != nil {
			return err
		}
	}
	at := len(buf)
	buf = appendExpiryKey(buf, expires, key)
	if err := idx.Put(buf[at:], nil); err != nil {
		return err
	}
	at = len(buf)
	buf = append(buf, key...)
	k := buf[at:len(buf):len(buf)]
	v := appendEntry(buf[len(buf):], state, fp, token, leaseUntil, expires, record)
	return tx.Bucket(entriesBucket).Put(k, v)
}

// expiryFillPercent is how full the expiry index's pages are split: its
// keys arrive in nearly ascending order (now plus a fixed retention).
const expiryFillPercent = 0.9

func del(tx *bolt.Tx, key string, e *entry) error {
	if e != nil {
		if err := tx.Bucket(expiryBucket).Delete(expiryKey(e.Expires, key)); err != nil {
			return err
		}
	}
	return tx.Bucket(entriesBucket).Delete([]byte(key))
}

// answer is what an existing live entry means for a claim, or 0 when the
// claim should be written.
func answer(e *entry, fp *dedupe.Fingerprint, token string, now time.Time) (dedupe.ClaimResult, error) {
	switch {
	case e.claimed() && string(e.Token) == token: // a retry of this claim
		if e.State == stateTookOver {
			return dedupe.ClaimResult{Status: dedupe.TookOver}, nil
		}
		return dedupe.ClaimResult{Status: dedupe.Claimed}, nil
	case e.Fingerprint != *fp:
		return dedupe.ClaimResult{Status: dedupe.Mismatch}, nil
	case e.State == stateRecorded:
		rec, err := dedupe.UnmarshalRecord(e.Record)
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("decoding record: %w", err)
		}
		return dedupe.ClaimResult{Status: dedupe.Recorded, Record: rec, Expires: time.UnixMilli(e.Expires)}, nil
	case e.LeaseUntil > ms(now):
		return dedupe.ClaimResult{Status: dedupe.InFlight, LeaseUntil: time.UnixMilli(e.LeaseUntil)}, nil
	}
	return dedupe.ClaimResult{}, nil // an expired lease: take it over
}

// Claim implements dedupe.Store.
func (s *Store) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	// Replays and in-flight answers never write.
	var res dedupe.ClaimResult
	err := s.db.View(func(tx *bolt.Tx) error {
		e, found, err := load(tx, key, c.Now)
		if err != nil || !found {
			return err
		}
		res, err = answer(&e, &c.Fingerprint, c.Token, c.Now)
		return err
	})
	if err != nil || res.Status != 0 {
		return res, err
	}
	op := &claimOp{key: key, c: c}
	if err := s.commit.Do(op); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("bolt claim: %w", err)
	}
	return op.res, nil
}

// claimOp is a claim's write, and its answer.
type claimOp struct {
	key string
	c   dedupe.Claim
	res dedupe.ClaimResult
}

// Apply writes the claim, unless a live entry answers it.
func (op *claimOp) Apply(tx *bolt.Tx) error {
	c := &op.c
	e, found, ok := stored(tx, op.key)
	if !ok {
		return errMalformed
	}
	live := found && e.Expires > ms(c.Now)
	if live {
		var err error
		if op.res, err = answer(&e, &c.Fingerprint, c.Token, c.Now); err != nil || op.res.Status != 0 {
			return err
		}
	}
	var state byte = stateClaimed
	op.res = dedupe.ClaimResult{Status: dedupe.Claimed}
	if live {
		op.res.Status, state = dedupe.TookOver, stateTookOver
	}
	return put(tx, op.key, e.Expires, found, state, &c.Fingerprint, c.Token, ms(c.Now.Add(c.Lease)), ms(c.Now.Add(c.Retention)), nil)
}

// Record implements dedupe.Store.
func (s *Store) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	// A lost claim is carried out of the transaction, not returned from
	// it: a grouped function that fails is run again in a transaction of
	// its own.
	op := &recordOp{key: key, token: token, rec: dedupe.MarshalRecord(rec), expires: ms(now.Add(retention))}
	switch err := s.commit.Do(op); {
	case err != nil:
		return fmt.Errorf("bolt record: %w", err)
	case op.lost:
		return dedupe.ErrClaimLost
	}
	return nil
}

// recordOp is a record's write, and whether its claim was lost.
type recordOp struct {
	key, token string
	rec        []byte
	expires    int64
	lost       bool
}

// Apply writes the record, unless the claim was lost.
func (op *recordOp) Apply(tx *bolt.Tx) error {
	e, found, ok := stored(tx, op.key)
	if op.lost = !found || !ok || string(e.Token) != op.token; op.lost {
		return nil
	}
	if e.State == stateRecorded {
		return nil // a retry of this record
	}
	return put(tx, op.key, e.Expires, true, stateRecorded, &e.Fingerprint, op.token, 0, op.expires, op.rec)
}

// Release implements dedupe.Store.
func (s *Store) Release(ctx context.Context, key, token string) error {
	err := s.commit.Update(func(tx *bolt.Tx) error {
		e, found, ok := stored(tx, key)
		if !found || !ok || !e.claimed() || string(e.Token) != token {
			return nil
		}
		return del(tx, key, &e)
	})
	if err != nil {
		return fmt.Errorf("bolt release: %w", err)
	}
	return nil
}

// Get implements dedupe.Store.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (dedupe.Entry, error) {
	var out dedupe.Entry
	err := s.db.View(func(tx *bolt.Tx) error {
		e, found, err := load(tx, key, now)
		if err != nil || !found {
			return err
		}
		out.Fingerprint, out.Expires = e.Fingerprint, time.UnixMilli(e.Expires)
		if e.claimed() {
			out.State, out.LeaseUntil = dedupe.StateClaimed, time.UnixMilli(e.LeaseUntil)
			return nil
		}
		out.State = dedupe.StateRecorded
		out.Record, err = dedupe.UnmarshalRecord(e.Record)
		return err
	})
	if err != nil {
		return dedupe.Entry{}, fmt.Errorf("bolt get: %w", err)
	}
	return out, nil
}

// Forget implements dedupe.Store.
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	found := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		e, ok, sound := stored(tx, key)
		if found = ok && sound; !found {
			return nil
		}
		return del(tx, key, &e)
	})
	if err != nil {
		return false, fmt.Errorf("bolt forget: %w", err)
	}
	return found, nil
}

// purgeBatch bounds one purge transaction, so a large backlog does not hold
// the write lock for long.
const purgeBatch = 1000

// Purge deletes entries and watermarks expired at now; it returns how
// many it deleted.
func (s *Store) Purge(now time.Time) (int, error) {
	total := 0
	for _, pair := range expiring {
		n, err := s.purge(pair[0], pair[1], now)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// expiresOf reads the expiry of a stored value of bucket.
func expiresOf(bucket []byte, v []byte) (int64, bool) {
	if bytes.Equal(bucket, entitiesBucket) {
		e, err := unmarshalEntity(v)
		return e.expires(), err == nil
	}
	e, ok := decodeEntry(v)
	return e.Expires, ok
}

func (s *Store) purge(bucket, index []byte, now time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := s.db.Update(func(tx *bolt.Tx) error {
			c := tx.Bucket(index).Cursor()
			limit := make([]byte, 8)
			binary.BigEndian.PutUint64(limit, uint64(ms(now)))
			for k, _ := c.First(); k != nil && n < purgeBatch && bytes.Compare(k[:8], limit) <= 0; k, _ = c.Next() {
				key := k[8:]
				b := tx.Bucket(bucket)
				if v := b.Get(key); v != nil {
					if exp, ok := expiresOf(bucket, v); ok && exp == int64(binary.BigEndian.Uint64(k[:8])) {
						if err := b.Delete(key); err != nil {
							return err
						}
					}
				}
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}

func (s *Store) purgeLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.Purge(s.now()); err != nil {
				s.logger.Error("purging expired dedupe entries", "error", err)
			}
		}
	}
}

var _ dedupe.Store = (*Store)(nil)
