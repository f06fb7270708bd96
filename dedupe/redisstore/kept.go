package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/replicas"
)

// Keep stores value under key unless a value is kept there already, and
// returns the one kept: value, or the first writer's. A kept value never
// expires and never changes. It is one SET NX GET: of two instances that
// keep different values under one key, both get the first's. With
// WaitForReplicas, a value stored that too few replicas acknowledged is
// an error, as a claim's is.
func (s *Store) Keep(ctx context.Context, key string, value []byte) ([]byte, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	k := keptKey(s.prefix, key)
	cmd := redis.NewStringCmd(ctx, "set", k, value, "nx", "get")
	acked, err := s.write(ctx, k, cmd)
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("redis keep: %w", err)
	}
	v, err := cmd.Result()
	switch {
	case err == redis.Nil: // stored
		if short := s.repl.Check(replicas.Claim, acked); short != nil {
			return nil, fmt.Errorf("redis keep: %w", short)
		}
		return value, nil
	case err != nil:
		return nil, fmt.Errorf("redis keep: %w", err)
	}
	return []byte(v), nil
}

// Kept returns the value kept under key, nil when there is none.
func (s *Store) Kept(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	cmd := redis.NewStringCmd(ctx, "get", keptKey(s.prefix, key))
	err := s.do(ctx, cmd)
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("redis kept: %w", err)
	}
	v, err := cmd.Result()
	switch {
	case err == redis.Nil:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("redis kept: %w", err)
	}
	return []byte(v), nil
}
