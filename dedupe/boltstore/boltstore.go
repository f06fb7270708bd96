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

func (e *entry) claimed() bool { return e.State == stateClaimed || e.State == stateTookOver }

// entry is an entry as stored: state byte (above),
// 32-byte fingerprint, lease-until and expiry (unix ms, 8 bytes each,
// big-endian), token (1-byte length and bytes), then the record
// (dedupe.MarshalRecord) to the end.
type entry struct {
	State       byte
	Fingerprint dedupe.Fingerprint
	Token       string
	LeaseUntil  int64 // unix ms, claimed only
	Expires     int64 // unix ms
	Record      []byte
}

const entryHeader = 1 + 32 + 8 + 8 + 1

func (e *entry) marshal() ([]byte, error) {
	if len(e.Token) > 255 {
		return nil, errors.New("token over 255 bytes")
	}
	b := make([]byte, 0, entryHeader+len(e.Token)+len(e.Record))
	b = append(b, e.State)
	b = append(b, e.Fingerprint[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(e.LeaseUntil))
	b = binary.BigEndian.AppendUint64(b, uint64(e.Expires))
	b = append(b, byte(len(e.Token)))
	b = append(b, e.Token...)
	return append(b, e.Record...), nil
}

func unmarshalEntry(b []byte) (*entry, error) {
	if len(b) < entryHeader || int(b[entryHeader-1]) > len(b)-entryHeader {
		return nil, errors.New("malformed entry")
	}
	e := &entry{State: b[0]}
	copy(e.Fingerprint[:], b[1:33])
	e.LeaseUntil = int64(binary.BigEndian.Uint64(b[33:41]))
	e.Expires = int64(binary.BigEndian.Uint64(b[41:49]))
	n := int(b[49])
	e.Token = string(b[entryHeader : entryHeader+n])
	e.Record = b[entryHeader+n:]
	return e, nil
}

// Store is a dedupe.Store on a bbolt file.
type Store struct {
	db     *bolt.DB
	write  func(func(*bolt.Tx) error) error // a group-committed update (boltcommit)
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
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating buckets: %w", err)
	}
	s := &Store{db: db, write: boltcommit.New(db).Update, now: opts.Now, logger: opts.Logger, stop: make(chan struct{})}
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

func load(tx *bolt.Tx, key string, now time.Time) (*entry, error) {
	v := tx.Bucket(entriesBucket).Get([]byte(key))
	if v == nil {
		return nil, nil
	}
	e, err := unmarshalEntry(v)
	if err != nil {
		return nil, err
	}
	if e.Expires <= ms(now) {
		return nil, nil
	}
	return e, nil
}

func expiryKey(exp int64, key string) []byte {
	b := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(b, uint64(exp))
	return append(b, key...)
}

// put writes e under key, keeping the expiry index in step with old.
func put(tx *bolt.Tx, key string, old, e *entry) error {
	idx := tx.Bucket(expiryBucket)
	if old != nil && old.Expires != e.Expires {
		if err := idx.Delete(expiryKey(old.Expires, key)); err != nil {
			return err
		}
	}
	if err := idx.Put(expiryKey(e.Expires, key), nil); err != nil {
		return err
	}
	b, err := e.marshal()
	if err != nil {
		return err
	}
	return tx.Bucket(entriesBucket).Put([]byte(key), b)
}

// raw returns the entry as stored, expired or not, for index upkeep.
func raw(tx *bolt.Tx, key string) *entry {
	v := tx.Bucket(entriesBucket).Get([]byte(key))
	if v == nil {
		return nil
	}
	e, err := unmarshalEntry(v)
	if err != nil {
		return nil
	}
	return e
}

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
func answer(e *entry, fp dedupe.Fingerprint, token string, now time.Time) (dedupe.ClaimResult, error) {
	switch {
	case e == nil:
		return dedupe.ClaimResult{}, nil
	case e.claimed() && e.Token == token: // a retry of this claim
		if e.State == stateTookOver {
			return dedupe.ClaimResult{Status: dedupe.TookOver}, nil
		}
		return dedupe.ClaimResult{Status: dedupe.Claimed}, nil
	case e.Fingerprint != fp:
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
	fp := c.Fingerprint
	// Replays and in-flight answers never write.
	var res dedupe.ClaimResult
	err := s.db.View(func(tx *bolt.Tx) error {
		e, err := load(tx, key, c.Now)
		if err != nil {
			return err
		}
		res, err = answer(e, fp, c.Token, c.Now)
		return err
	})
	if err != nil || res.Status != 0 {
		return res, err
	}
	err = s.write(func(tx *bolt.Tx) error {
		e, err := load(tx, key, c.Now)
		if err != nil {
			return err
		}
		if res, err = answer(e, fp, c.Token, c.Now); err != nil || res.Status != 0 {
			return err
		}
		var state byte = stateClaimed
		res.Status = dedupe.Claimed
		if e != nil {
			res.Status, state = dedupe.TookOver, stateTookOver
		}
		return put(tx, key, raw(tx, key), &entry{
			State: state, Fingerprint: fp, Token: c.Token,
			LeaseUntil: ms(c.Now.Add(c.Lease)), Expires: ms(c.Now.Add(c.Retention)),
		})
	})
	if err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("bolt claim: %w", err)
	}
	return res, nil
}

// Record implements dedupe.Store.
func (s *Store) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	b := dedupe.MarshalRecord(rec)
	// A lost claim is carried out of the transaction, not returned from
	// it: a grouped function that fails is run again in a transaction of
	// its own.
	var lost bool
	err := s.write(func(tx *bolt.Tx) error {
		e := raw(tx, key)
		if lost = e == nil || e.Token != token; lost {
			return nil
		}
		if e.State == stateRecorded {
			return nil // a retry of this record
		}
		return put(tx, key, e, &entry{State: stateRecorded, Fingerprint: e.Fingerprint, Token: token, Expires: ms(now.Add(retention)), Record: b})
	})
	switch {
	case err != nil:
		return fmt.Errorf("bolt record: %w", err)
	case lost:
		return dedupe.ErrClaimLost
	}
	return nil
}

// Release implements dedupe.Store.
func (s *Store) Release(ctx context.Context, key, token string) error {
	err := s.write(func(tx *bolt.Tx) error {
		e := raw(tx, key)
		if e == nil || !e.claimed() || e.Token != token {
			return nil
		}
		return del(tx, key, e)
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
		e, err := load(tx, key, now)
		if err != nil || e == nil {
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
		e := raw(tx, key)
		if found = e != nil; !found {
			return nil
		}
		return del(tx, key, e)
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
	e, err := unmarshalEntry(v)
	if err != nil {
		return 0, false
	}
	return e.Expires, true
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
