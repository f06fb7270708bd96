package redisqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/sender"
)

// Breakers is the sender.Remote on Redis: every instance's breakers share
// their state through it. Each name is a STRING holding gobreaker's
// shared state (JSON) under <prefix>:breaker:{<name>}.
type Breakers struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewBreakers returns the breakers' shared state store.
func NewBreakers(rdb redis.UniversalClient, prefix string) *Breakers {
	return &Breakers{rdb: rdb, prefix: prefix}
}

func (b *Breakers) key(name string) string { return b.prefix + ":breaker:{" + name + "}" }

// Load implements sender.Remote.
func (b *Breakers) Load(ctx context.Context, name string) ([]byte, error) {
	v, err := b.rdb.Get(ctx, b.key(name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redis breaker load: %w", err)
	}
	return v, nil
}

// mergeScript stores a breaker state unless the stored one is newer.
//
//	KEYS[1] the state
//	ARGV    the new state (JSON)
//	returns 1 stored, 0 kept the stored one
var mergeScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok1, c = pcall(cjson.decode, cur)
  local ok2, n = pcall(cjson.decode, ARGV[1])
  if ok1 and ok2 then
    local cg, ng = tonumber(c.generation) or 0, tonumber(n.generation) or 0
    local cr = tonumber(c.counts and c.counts.Requests) or 0
    local nr = tonumber(n.counts and n.counts.Requests) or 0
    if cg > ng or (cg == ng and cr > nr) then
      return 0
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
`)

// Merge implements sender.Remote.
func (b *Breakers) Merge(ctx context.Context, name string, data []byte) error {
	if err := mergeScript.Run(ctx, b.rdb, []string{b.key(name)}, data).Err(); err != nil {
		return fmt.Errorf("redis breaker merge: %w", err)
	}
	return nil
}

var _ sender.Remote = (*Breakers)(nil)
