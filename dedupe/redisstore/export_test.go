package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Token reads the fencing token that key's entry holds (claimed or
// recorded), straight from Redis.
func Token(ctx context.Context, rdb redis.Cmdable, prefix, key string) (string, error) {
	v, err := rdb.Get(ctx, entryKey(prefix, key)).Result()
	if err != nil {
		return "", err
	}
	e, ok := parseEntry(v)
	if !ok {
		return "", errors.New("malformed entry")
	}
	return e.token, nil
}
