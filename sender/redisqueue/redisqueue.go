// Package redisqueue is the Redis sender.Queue: one go-redis
// UniversalClient (single node, Sentinel or Cluster), each destination's
// keys under one hash tag, every step one Lua script; a lease and a
// settlement each move a whole batch in one round trip.
package redisqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/sender"
)

// Queue is a sender.Queue on Redis.
type Queue struct {
	rdb       redis.UniversalClient
	prefix    string
	retention time.Duration
}

// New returns a Queue whose keys start with prefix. Delivered IDs and dead
// letters are kept for retention.
func New(rdb redis.UniversalClient, prefix string, retention time.Duration) *Queue {
	return &Queue{rdb: rdb, prefix: prefix, retention: retention}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// stored is an envelope as stored: its payload's fingerprint, then the
// envelope.
func stored(e *sender.Envelope) string {
	fp := sender.Fingerprint(e.Payload)
	return string(fp[:]) + string(sender.MarshalEnvelope(e))
}

func decode(v any) (*sender.Envelope, error) {
	s, ok := v.(string)
	if !ok || len(s) < 8 {
		return nil, errors.New("redis queue: missing or short envelope")
	}
	return sender.UnmarshalEnvelope([]byte(s[8:]))
}

// enqueueScript adds an envelope unless its ID is known.
//
//	KEYS  env, due, leased, dead, done, donet, paused, ready
//	ARGV  id, stored envelope, due ms, now ms, retention ms
//	returns {state, mismatch}: mismatch -1 when added, 0 a duplicate of the
//	same payload, 1 of another payload
var enqueueScript = redis.NewScript(`
local fp = string.sub(ARGV[2], 1, 8)
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local state = 'queued'
  if redis.call('ZSCORE', KEYS[3], ARGV[1]) then
    state = 'leased'
  elseif redis.call('ZSCORE', KEYS[4], ARGV[1]) then
    state = 'dead'
  elseif redis.call('EXISTS', KEYS[7]) == 1 then
    state = 'paused'
  end
  return {state, (string.sub(cur, 1, 8) == fp) and 0 or 1}
end
local at = redis.call('ZSCORE', KEYS[6], ARGV[1])
if at and tonumber(at) > tonumber(ARGV[4]) - tonumber(ARGV[5]) then
  return {'delivered', (redis.call('HGET', KEYS[5], ARGV[1]) == fp) and 0 or 1}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if tonumber(ARGV[3]) <= tonumber(ARGV[4]) then
  redis.call('RPUSH', KEYS[8], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
end
if redis.call('EXISTS', KEYS[7]) == 1 then
  return {'paused', -1}
end
return {'queued', -1}
`)

// Enqueue implements sender.Queue.
func (q *Queue) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	k := keysOf(q.prefix, e.Destination)
	v, err := enqueueScript.Run(ctx, q.rdb, []string{k.env, k.due, k.leased, k.dead, k.done, k.donet, k.paused, k.ready},
		e.ID, stored(e), ms(e.NextAt), ms(e.CreatedAt), q.retention.Milliseconds()).Slice()
	if err != nil {
		return sender.EnqueueResult{}, fmt.Errorf("redis enqueue: %w", err)
	}
	state, _ := v[0].(string)
	m, _ := v[1].(int64)
	return sender.EnqueueResult{State: sender.State(state), Duplicate: m >= 0, Mismatch: m == 1}, nil
}

// leaseScript moves expired leases and retries now due to the ready
// list, then leases a batch from its head.
//
//	KEYS  due, leased, env, paused, ready
//	ARGV  now ms, n, lease end ms
//	returns the leased IDs, then their envelopes, oldest first
var leaseScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {}
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, 1000)
if #expired > 0 then
  redis.call('ZREM', KEYS[2], unpack(expired))
  redis.call('LPUSH', KEYS[5], unpack(expired))
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1000)
if #due > 0 then
  redis.call('ZREM', KEYS[1], unpack(due))
  redis.call('RPUSH', KEYS[5], unpack(due))
end
local ids = redis.call('LPOP', KEYS[5], tonumber(ARGV[2]))
if not ids then
  return {}
end
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[2], ARGV[3], id)
end
local out = {}
for _, id in ipairs(ids) do
  table.insert(out, id)
end
for _, blob in ipairs(redis.call('HMGET', KEYS[3], unpack(ids))) do
  table.insert(out, blob)
end
return out
`)

// quarantineScript sets aside leased entries that do not decode.
//
//	KEYS  leased, env, corrupt
//	ARGV  ids
var quarantineScript = redis.NewScript(`
for _, id in ipairs(ARGV) do
  redis.call('ZREM', KEYS[1], id)
  local e = redis.call('HGET', KEYS[2], id)
  if e then
    redis.call('HSET', KEYS[3], id, e)
    redis.call('HDEL', KEYS[2], id)
  end
end
return 0
`)

// Lease implements sender.Queue.
func (q *Queue) Lease(ctx context.Context, dest string, n int, now time.Time, lease time.Duration) ([]sender.Leased, error) {
	k := keysOf(q.prefix, dest)
	until := now.Add(lease)
	v, err := leaseScript.Run(ctx, q.rdb, []string{k.due, k.leased, k.env, k.paused, k.ready}, ms(now), n, ms(until)).Slice()
	if err != nil {
		return nil, fmt.Errorf("redis lease: %w", err)
	}
	n2 := len(v) / 2
	out := make([]sender.Leased, 0, n2)
	var bad []any
	for i := range n2 {
		e, err := decode(v[n2+i])
		if err != nil {
			bad = append(bad, v[i])
			continue
		}
		out = append(out, sender.Leased{Envelope: e, LeaseUntil: time.UnixMilli(ms(until))})
	}
	if len(bad) > 0 {
		// Set aside, so that they do not come back every lease.
		if err := quarantineScript.Run(ctx, q.rdb, []string{k.leased, k.env, k.corrupt}, bad...).Err(); err != nil {
			return out, fmt.Errorf("redis lease: setting aside %d envelopes that do not decode: %w", len(bad), err)
		}
	}
	return out, nil
}

// settleScript applies a batch of outcomes under their leases, then trims
// delivered IDs and dead letters past the retention (a bounded number).
//
//	KEYS  env, due, leased, dead, done, donet, ready
//	ARGV  now ms, retention ms, then per outcome: kind (d delivered, r
//	      retry, x dead, l release), id, lease end ms, stored envelope or
//	      "", score (due or dead-at ms)
//	returns the number of outcomes skipped (their lease was lost)
var settleScript = redis.NewScript(`
local skipped = 0
for i = 3, #ARGV, 5 do
  local kind, id, lu, blob, score = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4]
  local cur = redis.call('ZSCORE', KEYS[3], id)
  if not cur or tonumber(cur) ~= tonumber(lu) then
    skipped = skipped + 1
  else
    redis.call('ZREM', KEYS[3], id)
    if kind == 'd' then
      local e = redis.call('HGET', KEYS[1], id)
      redis.call('HDEL', KEYS[1], id)
      if e then
        redis.call('HSET', KEYS[5], id, string.sub(e, 1, 8))
        redis.call('ZADD', KEYS[6], ARGV[1], id)
      end
    elseif kind == 'l' then
      redis.call('LPUSH', KEYS[7], id)
    else
      redis.call('HSET', KEYS[1], id, blob)
      if kind == 'r' and tonumber(score) <= tonumber(ARGV[1]) then
        redis.call('RPUSH', KEYS[7], id)
      elseif kind == 'r' then
        redis.call('ZADD', KEYS[2], score, id)
      else
        redis.call('ZADD', KEYS[4], score, id)
      end
    end
  end
end
local cutoff = tonumber(ARGV[1]) - tonumber(ARGV[2])
local old = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', cutoff, 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('HDEL', KEYS[5], unpack(old))
  redis.call('ZREM', KEYS[6], unpack(old))
end
old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', cutoff, 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[4], unpack(old))
end
return skipped
`)

// Settle implements sender.Queue.
func (q *Queue) Settle(ctx context.Context, dest string, outcomes []sender.Outcome, now time.Time) (int, error) {
	if len(outcomes) == 0 {
		return 0, nil
	}
	k := keysOf(q.prefix, dest)
	args := make([]any, 0, 2+5*len(outcomes))
	args = append(args, ms(now), q.retention.Milliseconds())
	for _, o := range outcomes {
		var kind, blob string
		var score int64
		switch o.Kind {
		case sender.Delivered:
			kind = "d"
		case sender.Retry:
			kind, blob, score = "r", stored(o.Envelope), ms(o.Envelope.NextAt)
		case sender.Dead:
			kind, blob, score = "x", stored(o.Envelope), ms(o.Envelope.DeadAt)
		case sender.Release:
			kind, score = "l", ms(now)
		default:
			return 0, fmt.Errorf("redis settle: unknown outcome %d", o.Kind)
		}
		args = append(args, kind, o.ID, ms(o.LeaseUntil), blob, score)
	}
	n, err := settleScript.Run(ctx, q.rdb, []string{k.env, k.due, k.leased, k.dead, k.done, k.donet, k.ready}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redis settle: %w", err)
	}
	return n, nil
}

// SetPaused implements sender.Queue.
func (q *Queue) SetPaused(ctx context.Context, dest string, paused bool, by string) error {
	k := keysOf(q.prefix, dest)
	var err error
	if paused {
		if by == "" {
			by = "unknown"
		}
		err = q.rdb.Set(ctx, k.paused, by, 0).Err()
	} else {
		err = q.rdb.Del(ctx, k.paused).Err()
	}
	if err != nil {
		return fmt.Errorf("redis pause: %w", err)
	}
	return nil
}

// Paused implements sender.Queue.
func (q *Queue) Paused(ctx context.Context, dest string) (bool, string, error) {
	by, err := q.rdb.Get(ctx, keysOf(q.prefix, dest).paused).Result()
	if errors.Is(err, redis.Nil) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("redis paused: %w", err)
	}
	return true, by, nil
}

// statsScript reads a destination's depth.
//
//	KEYS  due, leased, dead, paused, ready, env, corrupt
//	ARGV  now ms
//	returns {queued, leased, dead, who paused it or false, oldest scheduled due ms or -1,
//	oldest dead ms or -1, corrupt, the envelope at the head of the ready
//	list or false}
var statsScript = redis.NewScript(`
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local dead = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
local oldest, oldestDead = -1, -1
if #first > 0 and tonumber(first[2]) <= tonumber(ARGV[1]) then
  oldest = tonumber(first[2])
end
if #dead > 0 then
  oldestDead = tonumber(dead[2])
end
local head = redis.call('LINDEX', KEYS[5], 0)
if head then
  head = redis.call('HGET', KEYS[6], head)
end
return {redis.call('ZCARD', KEYS[1]) + redis.call('LLEN', KEYS[5]), redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]), redis.call('GET', KEYS[4]), oldest, oldestDead, redis.call('HLEN', KEYS[7]), head}
`)

// Stats implements sender.Queue.
func (q *Queue) Stats(ctx context.Context, dest string, now time.Time) (sender.Stats, error) {
	k := keysOf(q.prefix, dest)
	v, err := statsScript.Run(ctx, q.rdb, []string{k.due, k.leased, k.dead, k.paused, k.ready, k.env, k.corrupt}, ms(now)).Slice()
	if err != nil {
		return sender.Stats{}, fmt.Errorf("redis stats: %w", err)
	}
	n := func(i int) int64 { x, _ := v[i].(int64); return x }
	s := sender.Stats{Queued: int(n(0)), Leased: int(n(1)), Dead: int(n(2)), Corrupt: int(n(6))}
	if by, ok := v[3].(string); ok {
		s.Paused, s.PausedBy = true, by
	}
	if n(4) >= 0 {
		s.OldestReady = now.Sub(time.UnixMilli(n(4)))
	}
	if len(v) > 7 && v[7] != nil { // the ready list's head is due since its NextAt
		if e, err := decode(v[7]); err == nil && now.Sub(e.NextAt) > s.OldestReady {
			s.OldestReady = max(0, now.Sub(e.NextAt))
		}
	}
	if n(5) >= 0 {
		s.OldestDead = time.UnixMilli(n(5))
	}
	return s, nil
}

// deadScript lists dead letters after a cursor.
//
//	KEYS  dead, env
//	ARGV  after ms, after id ("" for none), limit
//	returns {id, score, id, score, ...} and then the envelopes, in one list:
//	the first half are id/score pairs
var deadScript = redis.NewScript(`
-- Byte-wise, as Redis orders equal scores (Lua's > follows the locale).
local function greater(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return #a > #b
end
local after, afterID, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local ids, scores = {}, {}
local offset = 0
while #ids < limit do
  local chunk = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', offset, 256)
  if #chunk == 0 then
    break
  end
  for j = 1, #chunk, 2 do
    local s = tonumber(chunk[j+1])
    if s > after or greater(chunk[j], afterID) then
      table.insert(ids, chunk[j])
      table.insert(scores, chunk[j+1])
      if #ids >= limit then
        break
      end
    end
  end
  offset = offset + 256
end
if #ids == 0 then
  return {}
end
local out = {}
for j = 1, #ids do
  table.insert(out, ids[j])
  table.insert(out, scores[j])
end
local blobs = redis.call('HMGET', KEYS[2], unpack(ids))
for j = 1, #blobs do
  table.insert(out, blobs[j])
end
return out
`)

// Dead implements sender.Queue. The cursor is "<dead-at ms>:<id>".
func (q *Queue) Dead(ctx context.Context, dest, cursor string, limit int) ([]*sender.Envelope, string, error) {
	k := keysOf(q.prefix, dest)
	afterMs, afterID := int64(-1), ""
	if cursor != "" {
		s, id, ok := strings.Cut(cursor, ":")
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil {
			return nil, "", fmt.Errorf("%w: bad cursor %q", sender.ErrBadFilter, cursor)
		}
		afterMs, afterID = n, id
	}
	v, err := deadScript.Run(ctx, q.rdb, []string{k.dead, k.env}, afterMs, afterID, limit).Slice()
	if err != nil {
		return nil, "", fmt.Errorf("redis dead: %w", err)
	}
	n := len(v) / 3
	var out []*sender.Envelope
	for j := range n {
		raw := v[2*n+j]
		if raw == nil {
			continue // purged meanwhile
		}
		e, err := decode(raw)
		if err != nil {
			return nil, "", fmt.Errorf("redis dead: %w", err)
		}
		out = append(out, e)
	}
	next := ""
	if n == limit && n > 0 {
		next = fmt.Sprintf("%v:%v", v[2*(n-1)+1], v[2*(n-1)])
	}
	return out, next, nil
}

// getScript reads one envelope and its state.
//
//	KEYS  env, leased, dead, paused
//	ARGV  id
//	returns {envelope or false, leased, dead, paused}
var getScript = redis.NewScript(`
local e = redis.call('HGET', KEYS[1], ARGV[1])
local l = redis.call('ZSCORE', KEYS[2], ARGV[1]) and 1 or 0
local d = redis.call('ZSCORE', KEYS[3], ARGV[1]) and 1 or 0
return {e, l, d, redis.call('EXISTS', KEYS[4])}
`)

// Get implements sender.Queue.
func (q *Queue) Get(ctx context.Context, dest, id string) (*sender.Envelope, sender.State, error) {
	k := keysOf(q.prefix, dest)
	v, err := getScript.Run(ctx, q.rdb, []string{k.env, k.leased, k.dead, k.paused}, id).Slice()
	if err != nil {
		return nil, "", fmt.Errorf("redis get: %w", err)
	}
	if v[0] == nil {
		return nil, "", sender.ErrNotFound
	}
	e, err := decode(v[0])
	if err != nil {
		return nil, "", fmt.Errorf("redis get: %w", err)
	}
	switch {
	case v[1] == int64(1):
		return e, sender.StateLeased, nil
	case v[2] == int64(1):
		return e, sender.StateDead, nil
	case v[3] == int64(1):
		return e, sender.StatePaused, nil
	}
	return e, sender.StateQueued, nil
}

// redriveScript moves dead letters back to due.
//
//	KEYS  env, dead, ready
//	ARGV  now ms, then per letter: id, stored envelope (redriven)
//	returns the IDs moved (those still dead)
var redriveScript = redis.NewScript(`
local moved = {}
for i = 2, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    redis.call('ZREM', KEYS[2], ARGV[i])
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+1])
    redis.call('RPUSH', KEYS[3], ARGV[i])
    table.insert(moved, ARGV[i])
  end
end
return moved
`)

// Redrive implements sender.Queue.
func (q *Queue) Redrive(ctx context.Context, dest string, ids []string, redriveID string, now time.Time) ([]string, error) {
	k := keysOf(q.prefix, dest)
	args := []any{ms(now)}
	for _, id := range ids {
		e, state, err := q.Get(ctx, dest, id)
		if errors.Is(err, sender.ErrNotFound) || state != sender.StateDead {
			continue
		}
		if err != nil {
			return nil, err
		}
		sender.Redriven(e, redriveID, now)
		args = append(args, id, stored(e))
	}
	if len(args) == 1 {
		return nil, nil
	}
	moved, err := redriveScript.Run(ctx, q.rdb, []string{k.env, k.dead, k.ready}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redis redrive: %w", err)
	}
	return moved, nil
}

// purgeScript deletes dead letters.
//
//	KEYS  env, dead
//	ARGV  ids
//	returns how many went
var purgeScript = redis.NewScript(`
local n = 0
for i = 1, #ARGV do
  if redis.call('ZREM', KEYS[2], ARGV[i]) == 1 then
    redis.call('HDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
`)

// Purge implements sender.Queue.
func (q *Queue) Purge(ctx context.Context, dest string, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	k := keysOf(q.prefix, dest)
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	n, err := purgeScript.Run(ctx, q.rdb, []string{k.env, k.dead}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redis purge: %w", err)
	}
	return n, nil
}

var _ sender.Queue = (*Queue)(nil)

// redriveKey is a STRING holding a redrive's audit record (JSON), kept for
// the retention.
func (q *Queue) redriveKey(id string) string { return q.prefix + ":redrive:" + id }

// PutRedrive implements sender.Audit.
func (q *Queue) PutRedrive(ctx context.Context, r *sender.Redrive) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := q.rdb.Set(ctx, q.redriveKey(r.ID), b, q.retention).Err(); err != nil {
		return fmt.Errorf("redis put redrive: %w", err)
	}
	return nil
}

// GetRedrive implements sender.Audit.
func (q *Queue) GetRedrive(ctx context.Context, id string) (*sender.Redrive, error) {
	b, err := q.rdb.Get(ctx, q.redriveKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, sender.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redis get redrive: %w", err)
	}
	r := new(sender.Redrive)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("redis get redrive: %w", err)
	}
	return r, nil
}

var _ sender.Audit = (*Queue)(nil)
