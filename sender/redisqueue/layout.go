package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// LayoutVersion is the version of the key schema in keys.go. hookgate was
// never released with an earlier one, and reads none.
const LayoutVersion = "3"

// ErrLayout means a store whose queue is in another layout than
// LayoutVersion.
var ErrLayout = errors.New("the sender's queue is in another layout")

// layoutKey is a STRING holding the layout version of the queue under a
// prefix.
func layoutKey(prefix string) string { return prefix + ":q:layout" }

// CheckLayout refuses a store whose queue is not in LayoutVersion
// (ErrLayout): one that records another version, or one that holds
// destinations but records none (written before the version was kept).
// It records the version in a store that holds no queue yet. Once it
// has answered nil, the queue writes and leases; until then Enqueue,
// Lease, Move, Redrive, Purge and Drop check first, so that a store
// Redis could not be asked about at start is never read in part.
func (q *Queue) CheckLayout(ctx context.Context) error {
	if q.layoutChecked.Load() {
		return nil
	}
	key := layoutKey(q.prefix)
	for {
		v, err := q.rdb.Get(ctx, key).Result()
		switch {
		case err == nil && v == LayoutVersion:
			q.layoutChecked.Store(true)
			return nil
		case err == nil:
			return q.refuse(strconv.Quote(v))
		case !errors.Is(err, redis.Nil):
			return fmt.Errorf("redis layout: %w", err)
		}
		for _, k := range []string{destsKey(q.prefix), sinceKey(q.prefix)} {
			n, err := q.rdb.Exists(ctx, k).Result()
			if err != nil {
				return fmt.Errorf("redis layout: %w", err)
			}
			if n > 0 {
				return q.refuse("1 (none recorded)")
			}
		}
		set, err := q.rdb.SetNX(ctx, key, LayoutVersion, 0).Result()
		if err != nil {
			return fmt.Errorf("redis layout: %w", err)
		}
		if set {
			q.layoutChecked.Store(true)
			return nil
		}
		// Another instance recorded a version meanwhile: read it.
	}
}

func (q *Queue) refuse(version string) error {
	return fmt.Errorf("%w: the keys under the prefix %q hold the sender's queue in layout version %s, and this hookgate reads version %s only; "+
		"start it on a fresh store: another key_prefix, or an empty Redis database (no version of hookgate reads the old layout)",
		ErrLayout, q.prefix, version, LayoutVersion)
}
