package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/hookgate/hookgate/sender"
)

// Breakers is the sender.Remote on Redis: every instance's breakers share
// their state through it. Each breaker is a HASH under
// <prefix>:breaker:{<name>}: field "s" holds the shared state, "<gen>
// <state> <expiry ms> <since ms>", and field "i:<instance>" each
// instance's report, "<ok ms> <failing ms> <at ms>" (0 for a zero time).
// The hash expires when no instance has written it for a while
// (sender.Update.Keep).
type Breakers struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewBreakers returns the breakers' shared state store.
func NewBreakers(rdb redis.UniversalClient, prefix string) *Breakers {
	return &Breakers{rdb: rdb, prefix: prefix}
}

func (b *Breakers) key(name string) string { return b.prefix + ":breaker:{" + name + "}" }

// msText is t in unix milliseconds, 0 for the zero time.
func msText(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// times reads n space-separated unix milliseconds (0: the zero time).
func times(s string, n int) ([]time.Time, bool) {
	f := strings.Fields(s)
	if len(f) != n {
		return nil, false
	}
	out := make([]time.Time, n)
	for i, v := range f {
		m, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, false
		}
		if m != 0 {
			out[i] = time.UnixMilli(m)
		}
	}
	return out, true
}

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
			if t, ok := times(v, 3); ok {
				bd.Reports[id] = sender.Report{OK: t[0], Failing: t[1], At: t[2]}
			}
			continue
		}
		gen, rest, _ := strings.Cut(v, " ")
		state, rest, _ := strings.Cut(rest, " ")
		g, err1 := strconv.ParseUint(gen, 10, 64)
		st, err2 := strconv.Atoi(state)
		t, ok := times(rest, 2)
		if k == "s" && err1 == nil && err2 == nil && ok {
			bd.Shared = sender.Shared{Gen: g, State: gobreaker.State(st), Expiry: t[0], Since: t[1]}
		}
	}
	return bd, nil
}

// putScript stores an instance's report, forgets others', and replaces the
// shared state if it is still of the generation given.
//
//	KEYS[1] the breaker's hash
//	ARGV    instance, report, keep ms, generation ("" to leave the shared
//	        state), next shared state, then the instances to forget
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
	r := u.Report
	args := []any{u.Instance, msText(r.OK) + " " + msText(r.Failing) + " " + msText(r.At), u.Keep.Milliseconds(), "", ""}
	if n := u.Next; n != nil {
		args[3] = strconv.FormatUint(u.Gen, 10)
		args[4] = strconv.FormatUint(n.Gen, 10) + " " + strconv.Itoa(int(n.State)) + " " + msText(n.Expiry) + " " + msText(n.Since)
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
