package destinations

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/replicas"
)

// Backend keeps the records, each an opaque value under its name, and a
// version that every change moves on. Both backends pass the one suite
// in backend_test.go.
type Backend interface {
	// Version is the records' version: it changes with every Put that
	// changes them, and is 0 while none was ever made. Reading it writes
	// nothing.
	Version(ctx context.Context) (uint64, error)
	// All reads every record, and the version they are of.
	All(ctx context.Context) (map[string][]byte, uint64, error)
	// Get reads name's record, nil when there is none.
	Get(ctx context.Context, name string) ([]byte, error)
	// Put changes name's record from old to next, atomically: old nil
	// creates it (ErrExists when there is one), else the stored record
	// must be old byte for byte (ErrChanged: another change came first,
	// or it was deleted); next nil deletes it.
	Put(ctx context.Context, name string, old, next []byte) error
}

// Backend errors.
var (
	ErrExists  = errors.New("a destination of that name exists")
	ErrChanged = errors.New("the destination changed meanwhile")
	errNothing = errors.New("destinations: a Put with neither an old nor a next record")
)

// Bolt is the Backend in the embedded store: a bucket of records whose
// sequence is the version.
type Bolt struct{ db *bolt.DB }

// NewBolt returns the Backend in db.
func NewBolt(db *bolt.DB) *Bolt { return &Bolt{db: db} }

// boltBucket holds the records, name -> record; its sequence is the
// version.
var boltBucket = []byte("sender_destinations")

// Version implements Backend.
func (b *Bolt) Version(context.Context) (uint64, error) {
	var v uint64
	err := b.db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(boltBucket); bk != nil {
			v = bk.Sequence()
		}
		return nil
	})
	return v, err
}

// All implements Backend.
func (b *Bolt) All(context.Context) (map[string][]byte, uint64, error) {
	out := map[string][]byte{}
	var v uint64
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(boltBucket)
		if bk == nil {
			return nil
		}
		v = bk.Sequence()
		return bk.ForEach(func(k, val []byte) error {
			out[string(k)] = append([]byte(nil), val...)
			return nil
		})
	})
	return out, v, err
}

// Get implements Backend.
func (b *Bolt) Get(_ context.Context, name string) ([]byte, error) {
	var out []byte
	err := b.db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(boltBucket); bk != nil {
			if v := bk.Get([]byte(name)); v != nil {
				out = append([]byte(nil), v...)
			}
		}
		return nil
	})
	return out, err
}

// Put implements Backend.
func (b *Bolt) Put(_ context.Context, name string, old, next []byte) error {
	if old == nil && next == nil {
		return errNothing
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(boltBucket)
		if err != nil {
			return err
		}
		cur := bk.Get([]byte(name))
		switch {
		case old == nil && cur != nil:
			return ErrExists
		case old != nil && (cur == nil || string(cur) != string(old)):
			return ErrChanged
		}
		if next == nil {
			err = bk.Delete([]byte(name))
		} else {
			err = bk.Put([]byte(name), next)
		}
		if err != nil {
			return err
		}
		_, err = bk.NextSequence()
		return err
	})
}

// Redis is the Backend on Redis: a hash of records and a version
// counter, under one hash tag (one Redis Cluster slot), so that a Put
// changes both at once.
//
//	<prefix>:{destinations}          HASH name -> record
//	<prefix>:{destinations}:version  INCR'd by every Put
type Redis struct {
	rdb           redis.UniversalClient
	hash, version string
	repl          *replicas.Waiter // nil: min_replicas 0
}

// WaitForReplicas makes each Put wait for w's replicas (min_replicas),
// and refuse when too few acknowledge it: its outcome is then unknown.
func (r *Redis) WaitForReplicas(w *replicas.Waiter) *Redis {
	r.repl = w
	return r
}

// NewRedis returns the Backend on rdb, its keys under prefix.
func NewRedis(rdb redis.UniversalClient, prefix string) *Redis {
	return &Redis{rdb: rdb, hash: prefix + ":{destinations}", version: prefix + ":{destinations}:version"}
}

// Version implements Backend.
func (r *Redis) Version(ctx context.Context) (uint64, error) {
	v, err := r.rdb.Get(ctx, r.version).Uint64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("redis destinations version: %w", err)
	}
	return v, nil
}

// allScript reads the records and their version at once.
var allScript = redis.NewScript(`
return {redis.call('GET', KEYS[2]) or '0', redis.call('HGETALL', KEYS[1])}
`)

// All implements Backend.
func (r *Redis) All(ctx context.Context) (map[string][]byte, uint64, error) {
	res, err := allScript.Run(ctx, r.rdb, []string{r.hash, r.version}).Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("redis destinations: %w", err)
	}
	var v uint64
	if _, err := fmt.Sscan(res[0].(string), &v); err != nil {
		return nil, 0, fmt.Errorf("redis destinations version %q: %w", res[0], err)
	}
	kv, _ := res[1].([]any)
	out := make(map[string][]byte, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		val, _ := kv[i+1].(string)
		out[k] = []byte(val)
	}
	return out, v, nil
}

// Get implements Backend.
func (r *Redis) Get(ctx context.Context, name string) ([]byte, error) {
	v, err := r.rdb.HGet(ctx, r.hash, name).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redis destination: %w", err)
	}
	return v, nil
}

// putScript is Put.
//
//	KEYS  the hash, the version
//	ARGV  name, mode (c create, u update, d delete), old, next
//	returns "ok", "exists" or "changed"
var putScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == 'c' then
  if cur then return 'exists' end
elseif cur ~= ARGV[3] then
  return 'changed'
end
if ARGV[2] == 'd' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
end
redis.call('INCR', KEYS[2])
return 'ok'
`)

// Put implements Backend.
func (r *Redis) Put(ctx context.Context, name string, old, next []byte) error {
	mode := "u"
	switch {
	case old == nil:
		mode = "c"
		if next == nil {
			return errNothing
		}
	case next == nil:
		mode = "d"
	}
	keys, args := []string{r.hash, r.version}, []any{name, mode, string(old), string(next)}
	var cmd *redis.Cmd
	if r.repl != nil {
		cmd = r.repl.Run(ctx, replicas.Destination, putScript, keys, args...)
	} else {
		cmd = putScript.Run(ctx, r.rdb, keys, args...)
	}
	res, err := cmd.Text()
	if err != nil {
		return fmt.Errorf("redis destinations: %w", err)
	}
	switch res {
	case "exists":
		return ErrExists
	case "changed":
		return ErrChanged
	}
	return nil
}
