package boltstore

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// keptBucket holds the values kept once and for good (Keep), by key:
// never expired, never purged.
var keptBucket = []byte("kept")

// Keep stores value under key unless a value is kept there already, and
// returns the one kept: value, or the first writer's. A kept value never
// expires and never changes. One transaction: of two concurrent Keeps of
// one key, the second returns the first's value.
func (s *Store) Keep(ctx context.Context, key string, value []byte) ([]byte, error) {
	if kept, err := s.Kept(ctx, key); err != nil || kept != nil {
		return kept, err // kept already: nothing to write
	}
	var kept []byte
	err := s.commit.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(keptBucket)
		if v := b.Get([]byte(key)); v != nil {
			kept = append([]byte(nil), v...)
			return nil
		}
		kept = value
		return b.Put([]byte(key), value)
	})
	if err != nil {
		return nil, fmt.Errorf("bolt keep: %w", err)
	}
	return kept, nil
}

// Kept returns the value kept under key, nil when there is none.
func (s *Store) Kept(ctx context.Context, key string) ([]byte, error) {
	var kept []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(keptBucket).Get([]byte(key)); v != nil {
			kept = append([]byte(nil), v...) // the transaction's bytes: copied out
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt kept: %w", err)
	}
	return kept, nil
}
