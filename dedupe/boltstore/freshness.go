package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe/freshness"
)

// Buckets of the freshness state: entities by key, and their expiry index.
var (
	entitiesBucket     = []byte("fresh")
	entityExpiryBucket = []byte("fresh_expiry")
)

// entity is an entity's freshness state as stored: watermark, watermark
// expiry (unix ms, 0: no watermark), lease until (unix ms), 8 bytes each,
// big-endian, then the lease token to the end ("" when free).
type entity struct {
	Watermark  int64
	WExpires   int64
	LeaseUntil int64
	Token      string
}

func (e entity) marshal() []byte {
	b := make([]byte, 0, 24+len(e.Token))
	b = binary.BigEndian.AppendUint64(b, uint64(e.Watermark))
	b = binary.BigEndian.AppendUint64(b, uint64(e.WExpires))
	b = binary.BigEndian.AppendUint64(b, uint64(e.LeaseUntil))
	return append(b, e.Token...)
}

func unmarshalEntity(b []byte) (entity, error) {
	if len(b) < 24 {
		return entity{}, errors.New("malformed entity")
	}
	return entity{
		Watermark:  int64(binary.BigEndian.Uint64(b[0:8])),
		WExpires:   int64(binary.BigEndian.Uint64(b[8:16])),
		LeaseUntil: int64(binary.BigEndian.Uint64(b[16:24])),
		Token:      string(b[24:]),
	}, nil
}

// expires is when the entity's state can go: the later of the watermark's
// expiry and the lease's end.
func (e entity) expires() int64 { return max(e.WExpires, e.LeaseUntil) }

func loadEntity(tx *bolt.Tx, key string) (entity, bool, error) {
	v := tx.Bucket(entitiesBucket).Get([]byte(key))
	if v == nil {
		return entity{}, false, nil
	}
	e, err := unmarshalEntity(v)
	return e, err == nil, err
}

// putEntity writes e, keeping the expiry index in step, or deletes it when
// it holds neither a watermark nor a lease.
func putEntity(tx *bolt.Tx, key string, old entity, hadOld bool, e entity) error {
	idx := tx.Bucket(entityExpiryBucket)
	if hadOld {
		if err := idx.Delete(expiryKey(old.expires(), key)); err != nil {
			return err
		}
	}
	if e.WExpires == 0 && e.Token == "" {
		return tx.Bucket(entitiesBucket).Delete([]byte(key))
	}
	if err := idx.Put(expiryKey(e.expires(), key), nil); err != nil {
		return err
	}
	return tx.Bucket(entitiesBucket).Put([]byte(key), e.marshal())
}

// judge is what an entity's state means for an event of mark, or 0 when
// the lease may be taken.
func judge(e entity, ok bool, mark int64, token string, now time.Time) freshness.AcquireResult {
	var res freshness.AcquireResult
	if !ok {
		return res
	}
	if e.WExpires > ms(now) {
		res.Watermark, res.HasWatermark = e.Watermark, true
	}
	if e.Token == token && e.LeaseUntil > ms(now) {
		res.Status = freshness.Acquired // a retry of this acquire
		return res
	}
	if res.HasWatermark {
		if mark < e.Watermark {
			res.Status = freshness.Superseded
			return res
		}
	}
	if e.Token != "" && e.LeaseUntil > ms(now) {
		res.Status, res.LeaseUntil = freshness.Busy, time.UnixMilli(e.LeaseUntil)
	}
	return res
}

// AcquireEntity implements freshness.EntityStore.
func (s *Store) AcquireEntity(ctx context.Context, key string, a freshness.Acquire) (freshness.AcquireResult, error) {
	var res freshness.AcquireResult
	err := s.db.View(func(tx *bolt.Tx) error {
		e, ok, err := loadEntity(tx, key)
		res = judge(e, ok, a.Mark, a.Token, a.Now)
		return err
	})
	if err != nil || res.Status != 0 {
		return res, err
	}
	err = s.commit.Update(func(tx *bolt.Tx) error {
		e, ok, err := loadEntity(tx, key)
		if err != nil {
			return err
		}
		if res = judge(e, ok, a.Mark, a.Token, a.Now); res.Status != 0 {
			return nil
		}
		res.Status = freshness.Acquired
		next := e
		if e.WExpires <= ms(a.Now) {
			next.Watermark, next.WExpires = 0, 0 // expired: forgotten
		}
		next.Token, next.LeaseUntil = a.Token, ms(a.Now.Add(a.Lease))
		return putEntity(tx, key, e, ok, next)
	})
	if err != nil {
		return freshness.AcquireResult{}, fmt.Errorf("bolt acquire: %w", err)
	}
	return res, nil
}

// FinishEntity implements freshness.EntityStore.
func (s *Store) FinishEntity(ctx context.Context, key, token string, f freshness.Finish) error {
	err := s.commit.Update(func(tx *bolt.Tx) error {
		e, ok, err := loadEntity(tx, key)
		if err != nil {
			return err
		}
		next := e
		if f.Advance {
			// A max-register: moved up whoever holds the lease.
			if e.WExpires <= ms(f.Now) || f.Mark > e.Watermark {
				next.Watermark = f.Mark
			}
			next.WExpires = max(e.WExpires, ms(f.Now.Add(f.Retention)))
		}
		if ok && e.Token == token {
			next.Token, next.LeaseUntil = "", 0
		}
		if next == e {
			return nil
		}
		return putEntity(tx, key, e, ok, next)
	})
	if err != nil {
		return fmt.Errorf("bolt finish: %w", err)
	}
	return nil
}

// GetEntity implements freshness.EntityStore.
func (s *Store) GetEntity(ctx context.Context, key string, now time.Time) (freshness.EntityState, error) {
	var st freshness.EntityState
	err := s.db.View(func(tx *bolt.Tx) error {
		e, ok, err := loadEntity(tx, key)
		if err != nil || !ok {
			return err
		}
		if e.WExpires > ms(now) {
			st.Watermark, st.HasWatermark, st.WatermarkExpires = e.Watermark, true, time.UnixMilli(e.WExpires)
		}
		if e.Token != "" && e.LeaseUntil > ms(now) {
			st.LeaseUntil = time.UnixMilli(e.LeaseUntil)
		}
		return nil
	})
	if err != nil {
		return freshness.EntityState{}, fmt.Errorf("bolt get entity: %w", err)
	}
	return st, nil
}

var _ freshness.EntityStore = (*Store)(nil)
