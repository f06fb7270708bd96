package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/internal/replicas"
)

// acquireScript checks an event against the watermark and takes the lease.
//
//	KEYS[1] entity
//	ARGV    mark, token, now ms, lease ms, gc slack ms
//	returns {1, wm|false} acquired (also on a retry under the same token),
//	        {2, wm} superseded, {3, lease-until ms} busy
var acquireScript = redis.NewScript(`
local e = redis.call('HMGET', KEYS[1], 'wm', 'we', 'tok', 'lu')
local now = tonumber(ARGV[3])
local wm = e[1]
if wm and tonumber(e[2]) <= now then
  wm = false
end
if e[3] == ARGV[2] and tonumber(e[4]) > now then
  return {1, wm}
end
if wm and tonumber(ARGV[1]) < tonumber(wm) then
  return {2, wm}
end
if e[3] and e[3] ~= '' and tonumber(e[4]) > now then
  return {3, e[4]}
end
local lease = tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'tok', ARGV[2], 'lu', now + lease)
if redis.call('PTTL', KEYS[1]) < lease + tonumber(ARGV[5]) then
  redis.call('PEXPIRE', KEYS[1], lease + tonumber(ARGV[5]))
end
return {1, wm}
`)

// AcquireEntity implements freshness.EntityStore.
func (s *Store) AcquireEntity(ctx context.Context, entity string, a freshness.Acquire) (freshness.AcquireResult, error) {
	res, err := s.acquire(ctx, entity, a)
	if errors.Is(err, replicas.ErrShortfall) {
		// Refused, but the master may hold the lease: free it, as Claim
		// does. The token holds it only if this call took it.
		_ = s.FinishEntity(context.WithoutCancel(ctx), entity, a.Token, freshness.Finish{Now: a.Now})
	}
	return res, err
}

func (s *Store) acquire(ctx context.Context, entity string, a freshness.Acquire) (freshness.AcquireResult, error) {
	cmd, acked := s.eval(ctx, acquireScript, "evalsha", acquireScript.Hash(), 1, entityKey(s.prefix, entity),
		a.Mark, a.Token, ms(a.Now), a.Lease.Milliseconds(), gcSlack.Milliseconds())
	v, err := cmd.Slice()
	if err != nil {
		return freshness.AcquireResult{}, fmt.Errorf("redis acquire: %w", err)
	}
	code, _ := v[0].(int64)
	res := freshness.AcquireResult{Status: freshness.AcquireStatus(code)}
	if res.Status == freshness.Acquired {
		if short := s.repl.Check(replicas.Claim, acked); short != nil {
			return freshness.AcquireResult{}, fmt.Errorf("redis acquire: %w", short)
		}
	}
	var n int64
	if len(v) > 1 && v[1] != nil {
		if n, err = strconv.ParseInt(str(v[1]), 10, 64); err != nil {
			return freshness.AcquireResult{}, fmt.Errorf("redis acquire: bad answer %v", v)
		}
	}
	switch res.Status {
	case freshness.Acquired, freshness.Superseded:
		res.Watermark, res.HasWatermark = n, len(v) > 1 && v[1] != nil
	case freshness.Busy:
		res.LeaseUntil = time.UnixMilli(n)
	default:
		return freshness.AcquireResult{}, fmt.Errorf("redis acquire: unexpected answer %v", v)
	}
	return res, nil
}

// finishScript moves the watermark up (never down), whoever holds the
// lease, and frees the lease if the token holds it.
//
//	KEYS[1] entity
//	ARGV    token, advance (0|1), mark, now ms, watermark expiry ms, gc ttl ms
//	returns 1 the lease was released, 0 the token no longer held it
var finishScript = redis.NewScript(`
if ARGV[2] == '1' then
  local e = redis.call('HMGET', KEYS[1], 'wm', 'we')
  if not e[1] or tonumber(e[2]) <= tonumber(ARGV[4]) or tonumber(ARGV[3]) > tonumber(e[1]) then
    redis.call('HSET', KEYS[1], 'wm', ARGV[3])
  end
  if not e[2] or tonumber(e[2]) < tonumber(ARGV[5]) then
    redis.call('HSET', KEYS[1], 'we', ARGV[5])
  end
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[6]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[6])
  end
end
if redis.call('HGET', KEYS[1], 'tok') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'tok', '', 'lu', 0)
return 1
`)

// FinishEntity implements freshness.EntityStore.
func (s *Store) FinishEntity(ctx context.Context, entity, token string, f freshness.Finish) error {
	advance := "0"
	if f.Advance {
		advance = "1"
	}
	cmd, acked := s.eval(ctx, finishScript, "evalsha", finishScript.Hash(), 1, entityKey(s.prefix, entity),
		token, advance, f.Mark, ms(f.Now), ms(f.Now.Add(f.Retention)), (f.Retention + gcSlack).Milliseconds())
	released, err := cmd.Int()
	if err != nil {
		return fmt.Errorf("redis finish: %w", err)
	}
	if f.Advance || released == 1 { // it wrote
		return s.repl.Check(replicas.Watermark, acked) // counted, never refused
	}
	return nil
}

// GetEntity implements freshness.EntityStore.
func (s *Store) GetEntity(ctx context.Context, entity string, now time.Time) (freshness.EntityState, error) {
	v, err := s.rdb.HMGet(ctx, entityKey(s.prefix, entity), "wm", "we", "tok", "lu").Result()
	if err != nil {
		return freshness.EntityState{}, fmt.Errorf("redis get entity: %w", err)
	}
	var st freshness.EntityState
	we, _ := strconv.ParseInt(str(v[1]), 10, 64)
	if wm, err := strconv.ParseInt(str(v[0]), 10, 64); err == nil && we > ms(now) {
		st.Watermark, st.HasWatermark, st.WatermarkExpires = wm, true, time.UnixMilli(we)
	}
	if lu, _ := strconv.ParseInt(str(v[3]), 10, 64); str(v[2]) != "" && lu > ms(now) {
		st.LeaseUntil = time.UnixMilli(lu)
	}
	return st, nil
}

var _ freshness.EntityStore = (*Store)(nil)
