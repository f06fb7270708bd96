package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/sender"
)

// Breakers is the sender.Remote on Redis: every instance's breakers share
// their state through it. Each breaker is a HASH under
// <prefix>:breaker:{<destination>}: field "s" holds the shared state and
// field "i:<instance>" each instance's report, each in the sender's own
// text (sender.Shared and sender.Report's MarshalText): "<gen>
// open|closed <expiry ms> <since ms>" and "<ok ms> <failing ms> <at ms>"
// (0 for a zero time). The hash expires when no instance has written it
// for a while (sender.Update.Keep).
type Breakers struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewBreakers returns the breakers' shared state store.
func NewBreakers(rdb redis.UniversalClient, prefix string) *Breakers {
	return &Breakers{rdb: rdb, prefix: prefix}
}

func (b *Breakers) key(name string) string { return b.prefix + ":breaker:{" + name + "}" }

// Load implements sender.Remote. A field that does not parse is left
// out: a shared state that does not is the closed first one.
func (b *Breakers) Load(ctx context.Context, name string) (sender.Board, error) {
	h, err := b.rdb.HGetAll(ctx, b.key(name)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return sender.Board{}, fmt.Errorf("redis breaker load: %w", err)
	}
	bd := sender.Board{Reports: map[string]sender.Report{}}
	for k, v := range h {
		if id, ok := strings.CutPrefix(k, "i:"); ok {
			var r sender.Report
			if r.UnmarshalText([]byte(v)) == nil {
				bd.Reports[id] = r
			}
			continue
		}
		var sh sender.Shared
		if k == "s" && sh.UnmarshalText([]byte(v)) == nil {
			bd.Shared = sh
		}
	}
	return bd, nil
}

// putScript stores an instance's report, forgets others', and replaces the
// shared state if it is still of the generation given.
//
//	KEYS[1] the breaker's hash
//	ARGV    instance, report, keep ms, generation ("" to leave the shared
//	        state), next shared state, then the instances to forget; the
//	        generation of the stored state is the digits its text leads
//	        with
//	returns 1 when it stored the shared state, else 0
var putScript = redis.NewScript(`
redis.call('HSET', KEYS[1], 'i:' .. ARGV[1], ARGV[2])
for i = 6, #ARGV do
  redis.call('HDEL', KEYS[1], 'i:' .. ARGV[i])
end
local stored = 0
if ARGV[4] ~= '' then
  local cur = redis.call('HGET', KEYS[1], 's')
  if (cur and string.match(cur, '^%d+') or '0') == ARGV[4] then
    redis.call('HSET', KEYS[1], 's', ARGV[5])
    stored = 1
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return stored
`)

// Put implements sender.Remote.
func (b *Breakers) Put(ctx context.Context, name string, u sender.Update) (bool, error) {
	report, _ := u.Report.MarshalText() // never fails
	args := []any{u.Instance, report, u.Keep.Milliseconds(), "", ""}
	if n := u.Next; n != nil {
		next, _ := n.MarshalText()
		args[3], args[4] = strconv.FormatUint(u.Gen, 10), next
	}
	for _, id := range u.Forget {
		args = append(args, id)
	}
	stored, err := putScript.Run(ctx, b.rdb, []string{b.key(name)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("redis breaker put: %w", err)
	}
	return stored == 1, nil
}

var _ sender.Remote = (*Breakers)(nil)
