// Package redisqueue is the Redis sender.Queue: one go-redis
// UniversalClient (single node, Sentinel or Cluster), each destination's
// keys under one hash tag, every step one Lua script; a lease and a
// settlement each move a whole batch in one round trip.
package redisqueue

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/sender"
)

// Queue is a sender.Queue on Redis.
type Queue struct {
	rdb         redis.UniversalClient
	prefix      string
	retention   time.Duration
	history     sender.History
	callerClock bool

	registered    sync.Map    // destination names known to be in the dests SET
	keys          sync.Map    // destination name -> *keys
	layoutChecked atomic.Bool // CheckLayout answered nil
}

// New returns a Queue whose keys start with prefix. Delivered IDs and dead
// letters are kept for retention. Leases are judged by Redis's clock
// (TIME), so that an instance whose clock runs ahead cannot take over a
// live lease.
func New(rdb redis.UniversalClient, prefix string, retention time.Duration) *Queue {
	return &Queue{rdb: rdb, prefix: prefix, retention: retention, history: sender.History{Keep: retention}}
}

// KeepHistory sets how long what settled is kept (default: the
// retention, and no payload).
func (q *Queue) KeepHistory(h sender.History) {
	q.history = h
}

// WithCallerClock makes q judge leases by the now each call is given, as
// the embedded queue does: for tests that drive time.
func (q *Queue) WithCallerClock() *Queue {
	q.callerClock = true
	return q
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// register adds dest to the SET of destination names, once per process.
func (q *Queue) register(ctx context.Context, dest string) error {
	if _, ok := q.registered.Load(dest); ok {
		return nil
	}
	if err := q.rdb.SAdd(ctx, destsKey(q.prefix), dest).Err(); err != nil {
		return err
	}
	q.registered.Store(dest, true)
	return nil
}

// enqueueScript adds an envelope unless its ID is known.
//
//	KEYS  meta, body, leased, dead, paused, ready, due, hidx, hist
//	ARGV  id, record, payload, due ms, now ms, history ms
//	returns {state, mismatch, first}: mismatch -1 when added, 0 a duplicate
//	of the same payload, 1 of another payload; first 1 when the envelope
//	added is the only one the destination holds (its name is registered
//	again: another instance may have dropped it)
var enqueueScript = redis.NewScript(`
local fp = string.sub(ARGV[2], 2, 9)
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local state = 'queued'
  if redis.call('ZSCORE', KEYS[3], ARGV[1]) then
    state = 'leased'
  elseif redis.call('ZSCORE', KEYS[4], ARGV[1]) then
    state = 'dead'
  elseif redis.call('EXISTS', KEYS[5]) == 1 then
    state = 'paused'
  end
  return {state, (string.sub(cur, 2, 9) == fp) and 0 or 1}
end
local eid = redis.call('HGET', KEYS[8], ARGV[1])
if eid and tonumber(string.match(eid, '^(%d+)')) > tonumber(ARGV[5]) - tonumber(ARGV[6]) then
  local e = redis.call('XRANGE', KEYS[9], eid, eid)[1]
  if e and e[2][4] == 'd' then
    return {'delivered', (string.sub(e[2][6], 2, 9) == fp) and 0 or 1}
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
if tonumber(ARGV[4]) <= tonumber(ARGV[5]) then
  redis.call('RPUSH', KEYS[6], ARGV[1])
else
  redis.call('ZADD', KEYS[7], ARGV[4], ARGV[1])
end
local first = (redis.call('HLEN', KEYS[1]) == 1) and 1 or 0
if redis.call('EXISTS', KEYS[5]) == 1 then
  return {'paused', -1, first}
end
return {'queued', -1, first}
`)

// Enqueue implements sender.Queue.
func (q *Queue) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	if err := q.CheckLayout(ctx); err != nil {
		return sender.EnqueueResult{}, err
	}
	if len(e.RedriveID) >= 128 {
		return sender.EnqueueResult{}, fmt.Errorf("redis enqueue: a redrive ID of %d bytes (the record keeps under 128)", len(e.RedriveID))
	}
	if err := q.register(ctx, e.Destination); err != nil {
		return sender.EnqueueResult{}, fmt.Errorf("redis enqueue: %w", err)
	}
	k := q.keysOf(e.Destination)
	v, err := enqueueScript.Run(ctx, q.rdb, []string{k.meta, k.body, k.leased, k.dead, k.paused, k.ready, k.due, k.hidx, k.hist},
		e.ID, sender.MarshalMeta(sender.MetaOf(e)), e.Payload, ms(e.NextAt), ms(e.CreatedAt), q.history.Keep.Milliseconds()).Slice()
	if err != nil {
		return sender.EnqueueResult{}, fmt.Errorf("redis enqueue: %w", err)
	}
	state, _ := v[0].(string)
	m, _ := v[1].(int64)
	if len(v) > 2 && v[2] == int64(1) {
		// The destination's first envelope: its name goes into the SET
		// again, whatever this process remembers (a Drop elsewhere).
		q.registered.Delete(e.Destination)
		if err := q.register(ctx, e.Destination); err != nil {
			return sender.EnqueueResult{}, fmt.Errorf("redis enqueue: %w", err)
		}
	}
	return sender.EnqueueResult{State: sender.State(state), Duplicate: m >= 0, Mismatch: m == 1}, nil
}

// leaseScript moves expired leases and retries now due to the ready
// list, then leases a batch from its head. Leases are judged by Redis's
// clock (TIME), unless told to use the caller's.
//
//	KEYS  due, leased, meta, paused, ready, body, log
//	ARGV  now ms (the caller's: when a retry is due), n, lease ms, "1" to
//	      judge leases by the caller's now too
//	returns {lease end ms, ids..., records..., payloads..., logs...}, the
//	envelopes oldest first; {} when nothing was leased
var leaseScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {}
end
local now = tonumber(ARGV[1])
local lnow = now
if ARGV[4] ~= '1' then
  local t = redis.call('TIME')
  lnow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', lnow, 'LIMIT', 0, 1000)
if #expired > 0 then
  redis.call('ZREM', KEYS[2], unpack(expired))
  redis.call('LPUSH', KEYS[5], unpack(expired))
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1000)
if #due > 0 then
  redis.call('ZREM', KEYS[1], unpack(due))
  redis.call('RPUSH', KEYS[5], unpack(due))
end
local ids = redis.call('LPOP', KEYS[5], tonumber(ARGV[2]))
if not ids then
  return {}
end
local untilMs = lnow + tonumber(ARGV[3])
local leases = {}
local out = {untilMs}
for _, id in ipairs(ids) do
  table.insert(leases, untilMs)
  table.insert(leases, id)
  table.insert(out, id)
end
redis.call('ZADD', KEYS[2], unpack(leases))
for _, k in ipairs({KEYS[3], KEYS[6], KEYS[7]}) do
  for _, v in ipairs(redis.call('HMGET', k, unpack(ids))) do
    table.insert(out, v)
  end
end
return out
`)

// quarantineScript sets aside leased entries that do not decode.
//
//	KEYS  leased, meta, body, log, corrupt
//	ARGV  ids
var quarantineScript = redis.NewScript(`
for _, id in ipairs(ARGV) do
  redis.call('ZREM', KEYS[1], id)
  local m = redis.call('HGET', KEYS[2], id)
  if m then
    redis.call('HSET', KEYS[5], id, m)
  end
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[4], id)
end
return 0
`)

// str is a script's string answer; false (a missing hash field) is "".
func str(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// assemble decodes an envelope of dest from its parts as a script
// returned them.
func assemble(dest, id string, meta, body, log any) (*sender.Envelope, error) {
	m, ok := str(meta)
	if !ok {
		return nil, errors.New("redis queue: the envelope's record is missing")
	}
	rec, err := sender.UnmarshalMeta(dest, id, []byte(m))
	if err != nil {
		return nil, err
	}
	payload, _ := str(body)
	l, _ := str(log)
	attempts, err := sender.UnmarshalLog([]byte(l))
	if err != nil {
		return nil, err
	}
	return sender.Assemble(rec, []byte(payload), attempts), nil
}

// Lease implements sender.Queue.
func (q *Queue) Lease(ctx context.Context, dest string, n int, now time.Time, lease time.Duration) ([]sender.Leased, error) {
	if err := q.CheckLayout(ctx); err != nil {
		return nil, err
	}
	k := q.keysOf(dest)
	caller := "0"
	if q.callerClock {
		caller = "1"
	}
	v, err := leaseScript.Run(ctx, q.rdb, []string{k.due, k.leased, k.meta, k.paused, k.ready, k.body, k.log},
		ms(now), n, lease.Milliseconds(), caller).Slice()
	if err != nil {
		return nil, fmt.Errorf("redis lease: %w", err)
	}
	if len(v) == 0 {
		return nil, nil
	}
	until, _ := v[0].(int64)
	v = v[1:]
	n2 := len(v) / 4
	out := make([]sender.Leased, 0, n2)
	var bad []any
	for i := range n2 {
		id, _ := str(v[i])
		e, err := assemble(dest, id, v[n2+i], v[2*n2+i], v[3*n2+i])
		if err != nil {
			bad = append(bad, id)
			continue
		}
		out = append(out, sender.Leased{Envelope: e, LeaseUntil: time.UnixMilli(until)})
	}
	if len(bad) > 0 {
		// Set aside, so that they do not come back every lease.
		if err := quarantineScript.Run(ctx, q.rdb, []string{k.leased, k.meta, k.body, k.log, k.corrupt}, bad...).Err(); err != nil {
			return out, fmt.Errorf("redis lease: setting aside %d envelopes that do not decode: %w", len(bad), err)
		}
	}
	return out, nil
}

// settleScript applies a batch of outcomes, then trims what the history
// and the retention no longer keep (a bounded number of each). A
// delivered envelope leaves the queue for the history; a dead one stays a
// dead letter and is written to the history too. A dead letter past the
// retention leaves the history with the queue, as a purged one does.
//
//	KEYS  meta, body, log, due, leased, dead, ready, rdc, rdt, hist, hidx,
//	      hpay, hpayt
//	ARGV  now ms, retention ms, history ms, payload ms, then per outcome:
//	      kind (d delivered, r retry, x dead, l release), id, lease end ms,
//	      record or "", log or "", score (due or dead-at ms)
//	returns the number of outcomes skipped (their lease was lost)
var settleScript = redis.NewScript(trimHistoryLua + `
local now = tonumber(ARGV[1])
local keepPayload = tonumber(ARGV[4]) > 0
local last
-- What the batch writes to keys many outcomes share is gathered and
-- written once, after the loop (an ID settles at most once a batch):
local unleased, gone, hidx, hpay, hpayt = {}, {}, {}, {}, {}
-- xadd appends to the history, never before its newest entry (another
-- instance's clock may run ahead), and answers the entry's ID.
local function xadd(id, state, rec, lg)
  if not last then
    local t = redis.call('XREVRANGE', KEYS[10], '+', '-', 'COUNT', 1)[1]
    last = t and tonumber(string.match(t[1], '^(%d+)')) or 0
  end
  last = math.max(now, last)
  local eid = redis.call('XADD', KEYS[10], string.format('%d-*', last), 'i', id, 's', state, 'm', rec, 'l', lg)
  table.insert(hidx, id)
  table.insert(hidx, eid)
  return eid
end
-- hpayHeld is whether the history holds any payload, read once: a
-- delivery removes its ID's older payload only if one may be there.
local hpayHeld
local seen = {}
local skipped = 0
for i = 5, #ARGV, 6 do
  local kind, id, lu, rec, log, score = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4], ARGV[i+5]
  local cur = not seen[id] and redis.call('ZSCORE', KEYS[5], id)
  if not cur or tonumber(cur) ~= tonumber(lu) then
    skipped = skipped + 1
  else
    seen[id] = true
    table.insert(unleased, id)
    local m = redis.call('HGET', KEYS[1], id)
    local rid = ''
    if m and #m >= 18 then
      rid = string.sub(m, 19, 18 + string.byte(m, 18))
    end
    if rid ~= '' then
      -- counts written again after their trim are dated, and trimmed
      redis.call('ZADD', KEYS[9], 'NX', ARGV[1], rid)
    end
    if kind == 'd' then
      if rec == '' then rec = m end
      if log == '' then log = redis.call('HGET', KEYS[3], id) or '' end
      if rec then
        xadd(id, 'd', rec, log)
        local body = keepPayload and redis.call('HGET', KEYS[2], id)
        if body then
          table.insert(hpay, id)
          table.insert(hpay, body)
          table.insert(hpayt, now + tonumber(ARGV[4]))
          table.insert(hpayt, id)
        else
          if hpayHeld == nil then
            hpayHeld = redis.call('EXISTS', KEYS[12]) == 1
          end
          if hpayHeld then
            redis.call('HDEL', KEYS[12], id)
            redis.call('ZREM', KEYS[13], id)
          end
        end
      end
      table.insert(gone, id)
      if rid ~= '' then
        redis.call('HINCRBY', KEYS[8], rid .. ':d', 1)
      end
    elseif kind == 'l' then
      redis.call('LPUSH', KEYS[7], id)
    else
      redis.call('HSET', KEYS[1], id, rec)
      redis.call('HSET', KEYS[3], id, log)
      if kind == 'r' and tonumber(score) <= now then
        redis.call('RPUSH', KEYS[7], id)
      elseif kind == 'r' then
        redis.call('ZADD', KEYS[4], score, id)
      else
        redis.call('ZADD', KEYS[6], score, id)
        xadd(id, 'x', rec, log)
        if rid ~= '' then
          redis.call('HINCRBY', KEYS[8], rid .. ':x', 1)
        end
      end
    end
  end
end
if #unleased > 0 then
  redis.call('ZREM', KEYS[5], unpack(unleased))
end
if #hidx > 0 then
  redis.call('HSET', KEYS[11], unpack(hidx))
end
if #hpay > 0 then
  redis.call('HSET', KEYS[12], unpack(hpay))
  redis.call('ZADD', KEYS[13], unpack(hpayt))
end
if #gone > 0 then
  redis.call('HDEL', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[2], unpack(gone))
  redis.call('HDEL', KEYS[3], unpack(gone))
end
local cutoff = now - tonumber(ARGV[2])
local old = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', cutoff, 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('HDEL', KEYS[2], unpack(old))
  redis.call('HDEL', KEYS[3], unpack(old))
  redis.call('ZREM', KEYS[6], unpack(old))
  -- and their history entries, as a purge's: no row is left listed
  -- whose letter is not found
  for _, id in ipairs(old) do
    local eid = redis.call('HGET', KEYS[11], id)
    if eid then
      redis.call('XDEL', KEYS[10], eid)
    end
  end
  redis.call('HDEL', KEYS[11], unpack(old))
  redis.call('HDEL', KEYS[12], unpack(old))
  redis.call('ZREM', KEYS[13], unpack(old))
end
old = redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', cutoff, 'LIMIT', 0, 100)
for _, rid in ipairs(old) do
  redis.call('HDEL', KEYS[8], rid .. ':m', rid .. ':d', rid .. ':x', rid .. ':s')
  redis.call('ZREM', KEYS[9], rid)
end
trimHistory(KEYS[10], KEYS[11], KEYS[12], KEYS[13], now, tonumber(ARGV[3]))
return skipped
`)

// Settle implements sender.Queue.
func (q *Queue) Settle(ctx context.Context, dest string, outcomes []sender.Outcome, now time.Time) (int, error) {
	if len(outcomes) == 0 {
		return 0, nil
	}
	k := q.keysOf(dest)
	args := make([]any, 0, 4+6*len(outcomes))
	args = append(args, ms(now), q.retention.Milliseconds(), q.history.Keep.Milliseconds(), min(q.history.Payload, q.history.Keep).Milliseconds())
	for _, o := range outcomes {
		var kind string
		var rec, log []byte
		var score int64
		switch o.Kind {
		case sender.Delivered:
			kind = "d"
			if o.Envelope != nil {
				rec, log = sender.MarshalMeta(historyMeta(o.Envelope)), sender.MarshalLog(o.Envelope.Log)
			}
		case sender.Retry:
			kind, score = "r", ms(o.Envelope.NextAt)
			rec, log = sender.MarshalMeta(sender.MetaOf(o.Envelope)), sender.MarshalLog(o.Envelope.Log)
		case sender.Dead:
			kind, score = "x", ms(o.Envelope.DeadAt)
			rec, log = sender.MarshalMeta(sender.MetaOf(o.Envelope)), sender.MarshalLog(o.Envelope.Log)
		case sender.Release:
			kind, score = "l", ms(now)
		default:
			return 0, fmt.Errorf("redis settle: unknown outcome %d", o.Kind)
		}
		args = append(args, kind, o.ID, ms(o.LeaseUntil), rec, log, score)
	}
	n, err := settleScript.Run(ctx, q.rdb, []string{k.meta, k.body, k.log, k.due, k.leased, k.dead, k.ready, k.rdc, k.rdt,
		k.hist, k.hidx, k.hpay, k.hpayt}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redis settle: %w", err)
	}
	return n, nil
}

// SetPaused implements sender.Queue.
func (q *Queue) SetPaused(ctx context.Context, dest string, paused bool, by string) error {
	if err := q.CheckLayout(ctx); err != nil {
		return err
	}
	k := keysOf(q.prefix, dest)
	var err error
	if paused {
		if by == "" {
			by = "unknown"
		}
		if err = q.register(ctx, dest); err == nil {
			err = q.rdb.Set(ctx, k.paused, by, 0).Err()
		}
	} else if by == "" {
		err = q.rdb.Del(ctx, k.paused).Err()
	} else {
		var n int
		if n, err = resumeIfScript.Run(ctx, q.rdb, []string{k.paused}, by).Int(); err == nil && n == 0 {
			return fmt.Errorf("%w: %s is paused by another than %s", sender.ErrPausedByOther, dest, by)
		}
	}
	if err != nil {
		return fmt.Errorf("redis pause: %w", err)
	}
	return nil
}

// resumeIfScript resumes a destination only if by paused it.
//
//	KEYS  paused
//	ARGV  by
//	returns 1 when it is resumed (or was not paused), 0 when another paused it
var resumeIfScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`)

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
//	KEYS  due, leased, dead, paused, ready, meta, corrupt, hidx
//	ARGV  now ms
//	returns {queued, leased, dead, who paused it or false, oldest
//	scheduled due ms or -1, oldest dead ms or -1, corrupt, history entries
//	(HLEN of hidx: one per settled ID, O(1)), the record at the head of
//	the ready list or false}
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
  redis.call('ZCARD', KEYS[3]), redis.call('GET', KEYS[4]), oldest, oldestDead, redis.call('HLEN', KEYS[7]),
  redis.call('HLEN', KEYS[8]), head}
`)

// Stats implements sender.Queue.
func (q *Queue) Stats(ctx context.Context, dest string, now time.Time) (sender.Stats, error) {
	k := keysOf(q.prefix, dest)
	v, err := statsScript.Run(ctx, q.rdb, []string{k.due, k.leased, k.dead, k.paused, k.ready, k.meta, k.corrupt, k.hidx}, ms(now)).Slice()
	if err != nil {
		return sender.Stats{}, fmt.Errorf("redis stats: %w", err)
	}
	n := func(i int) int64 { x, _ := v[i].(int64); return x }
	s := sender.Stats{Queued: int(n(0)), Leased: int(n(1)), Dead: int(n(2)), Corrupt: int(n(6)), History: int(n(7))}
	if by, ok := v[3].(string); ok {
		s.Paused, s.PausedBy = true, by
	}
	if n(4) >= 0 {
		s.OldestReady = now.Sub(time.UnixMilli(n(4)))
	}
	if len(v) > 8 { // the ready list's head is due since its NextAt
		if m, ok := str(v[8]); ok {
			if rec, err := sender.UnmarshalMeta(dest, "", []byte(m)); err == nil && now.Sub(rec.NextAt) > s.OldestReady {
				s.OldestReady = max(0, now.Sub(rec.NextAt))
			}
		}
	}
	if n(5) >= 0 {
		s.OldestDead = time.UnixMilli(n(5))
	}
	return s, nil
}

// deadScript lists dead letters after a cursor.
//
//	KEYS  dead, meta
//	ARGV  after ms, after id ("" for none), limit
//	returns {id, score, id, score, ...} and then the records, in one list:
//	the first two thirds are id/score pairs
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
for _, m in ipairs(redis.call('HMGET', KEYS[2], unpack(ids))) do
  table.insert(out, m)
end
return out
`)

// Dead implements sender.Queue. The cursor is "<dead-at ms>:<id>".
func (q *Queue) Dead(ctx context.Context, dest, cursor string, limit int) ([]*sender.Meta, string, error) {
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
	v, err := deadScript.Run(ctx, q.rdb, []string{k.dead, k.meta}, afterMs, afterID, limit).Slice()
	if err != nil {
		return nil, "", fmt.Errorf("redis dead: %w", err)
	}
	n := len(v) / 3
	var out []*sender.Meta
	for j := range n {
		raw, ok := str(v[2*n+j])
		if !ok {
			continue // purged meanwhile
		}
		id, _ := str(v[2*j])
		score, _ := str(v[2*j+1])
		m, err := sender.UnmarshalMeta(dest, id, []byte(raw))
		if err != nil {
			m = sender.BrokenMeta(dest, id, err)
		}
		at, _ := strconv.ParseInt(score, 10, 64)
		m.State, m.DeadAt = sender.StateDead, time.UnixMilli(at)
		out = append(out, m)
	}
	next := ""
	if n == limit && n > 0 {
		next = fmt.Sprintf("%v:%v", v[2*(n-1)+1], v[2*(n-1)])
	}
	return out, next, nil
}

// metasScript reads records and states.
//
//	KEYS  meta, leased, dead, paused, hidx, hist
//	ARGV  ids
//	returns {paused, then per id: record or false, leased (1; 3 when
//	delivered, from the history), dead-at ms or false (3: the history
//	entry's ID)}
var metasScript = redis.NewScript(`
local out = {redis.call('EXISTS', KEYS[4])}
for _, id in ipairs(ARGV) do
  local m = redis.call('HGET', KEYS[1], id)
  local eid = (not m) and redis.call('HGET', KEYS[5], id)
  local e = eid and redis.call('XRANGE', KEYS[6], eid, eid)[1]
  if e and e[2][4] ~= 'd' then e = nil end
  table.insert(out, m or (e and e[2][6]) or false)
  if e then
    table.insert(out, 3)
    table.insert(out, eid)
  else
    table.insert(out, redis.call('ZSCORE', KEYS[2], id) and 1 or 0)
    table.insert(out, redis.call('ZSCORE', KEYS[3], id))
  end
end
return out
`)

// Metas implements sender.Queue.
func (q *Queue) Metas(ctx context.Context, dest string, ids []string) ([]*sender.Meta, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	k := keysOf(q.prefix, dest)
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	v, err := metasScript.Run(ctx, q.rdb, []string{k.meta, k.leased, k.dead, k.paused, k.hidx, k.hist}, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redis metas: %w", err)
	}
	paused := v[0] == int64(1)
	var out []*sender.Meta
	for i, id := range ids {
		raw, ok := str(v[1+3*i])
		if !ok {
			continue
		}
		m, err := sender.UnmarshalMeta(dest, id, []byte(raw))
		if err != nil {
			m = sender.BrokenMeta(dest, id, err)
		}
		if v[2+3*i] == int64(3) {
			eid, _ := str(v[3+3*i])
			m.State, m.SettledAt = sender.StateDelivered, entryTime(eid)
			out = append(out, m)
			continue
		}
		m.State = stateOf(v[2+3*i] == int64(1), v[3+3*i], paused)
		if m.State == sender.StateDead {
			s, _ := str(v[3+3*i])
			at, _ := strconv.ParseInt(s, 10, 64)
			m.DeadAt = time.UnixMilli(at)
		}
		out = append(out, m)
	}
	return out, nil
}

func stateOf(leased bool, deadScore any, paused bool) sender.State {
	switch {
	case leased:
		return sender.StateLeased
	case deadScore != nil:
		return sender.StateDead
	case paused:
		return sender.StatePaused
	}
	return sender.StateQueued
}

// getScript reads one envelope and its state.
//
//	KEYS  meta, body, log, leased, dead, paused, hidx, hist, hpay, hpayt
//	ARGV  id, now ms
//	returns {record or false, payload, log, leased, dead-at ms or false,
//	paused}; one the queue does not hold, from the history: {record,
//	payload or false (past its time at now too), log, "d", its entry's ID}
var getScript = redis.NewScript(`
local id = ARGV[1]
local m = redis.call('HGET', KEYS[1], id)
if not m then
  local eid = redis.call('HGET', KEYS[7], id)
  local e = eid and redis.call('XRANGE', KEYS[8], eid, eid)[1]
  if e and e[2][4] == 'd' then
    local untilMs = redis.call('ZSCORE', KEYS[10], id)
    local body = untilMs and tonumber(untilMs) >= tonumber(ARGV[2]) and redis.call('HGET', KEYS[9], id)
    return {e[2][6], body, e[2][8], 'd', eid}
  end
end
return {m, redis.call('HGET', KEYS[2], id), redis.call('HGET', KEYS[3], id),
  redis.call('ZSCORE', KEYS[4], id) and 1 or 0, redis.call('ZSCORE', KEYS[5], id), redis.call('EXISTS', KEYS[6])}
`)

// Get implements sender.Queue.
func (q *Queue) Get(ctx context.Context, dest, id string) (*sender.Envelope, sender.State, error) {
	k := keysOf(q.prefix, dest)
	v, err := getScript.Run(ctx, q.rdb, []string{k.meta, k.body, k.log, k.leased, k.dead, k.paused, k.hidx, k.hist, k.hpay, k.hpayt}, id, ms(q.now())).Slice()
	if err != nil {
		return nil, "", fmt.Errorf("redis get: %w", err)
	}
	if v[0] == nil {
		return nil, "", sender.ErrNotFound
	}
	e, err := assemble(dest, id, v[0], v[1], v[2])
	if err != nil {
		return nil, "", fmt.Errorf("redis get: %w", err)
	}
	if v[3] == "d" {
		if v[1] == nil {
			e.Payload, e.PayloadExpired = nil, true
		}
		return e, sender.StateDelivered, nil
	}
	state := stateOf(v[3] == int64(1), v[4], v[5] == int64(1))
	if state == sender.StateDead {
		s, _ := str(v[4])
		at, _ := strconv.ParseInt(s, 10, 64)
		e.DeadAt = time.UnixMilli(at)
	}
	return e, state, nil
}

// redriveLua is what redriveScript and resendScript share: moving a dead
// letter back to the ready list under the redrive ID ARGV[2], its record
// rewritten in place (sender.MetaRedriveOffset: the next time ARGV[3], the
// redrive ID), counted as superseded under the redrive that had moved it
// before. A record that does not decode is listed as broken, never sent.
//
//	KEYS  meta, dead, ready, rdc, rdt, ... (the script's own)
//	ARGV  now ms, redrive id, now as 8 bytes (big-endian ms), then ids
const redriveLua = `
local rid = ARGV[2]
local moved = {}
-- redriven is record m under this redrive, and the redrive ID it had.
local function redriven(m)
  local n = string.byte(m, 18)
  return string.sub(m, 1, 9) .. ARGV[3] .. string.char(#rid) .. rid .. string.sub(m, 19 + n), string.sub(m, 19, 18 + n)
end
local function redriveDead(id, m)
  if #m >= 18 and string.byte(m, 1) == 2 and redis.call('ZREM', KEYS[2], id) == 1 then
    local rec, old = redriven(m)
    if old ~= '' then
      redis.call('HINCRBY', KEYS[4], old .. ':x', -1)
      redis.call('HINCRBY', KEYS[4], old .. ':s', 1)
    end
    redis.call('HSET', KEYS[1], id, rec)
    redis.call('RPUSH', KEYS[3], id)
    table.insert(moved, id)
  end
end
`

// redriveDone ends redriveLua's scripts: the moves are counted and the
// redrive dated, and the IDs moved returned.
const redriveDone = `
if #moved > 0 then
  redis.call('HINCRBY', KEYS[4], rid .. ':m', #moved)
  redis.call('ZADD', KEYS[5], 'NX', ARGV[1], rid)
end
return moved
`

// redriveScript moves dead letters back to the ready list: read, check
// and write in one step, so that a letter moves at most once however many
// redrives run at once.
//
//	KEYS  meta, dead, ready, rdc, rdt
//	ARGV  now ms, redrive id, now as 8 bytes (big-endian ms), then ids
//	returns the IDs moved (those still dead)
var redriveScript = redis.NewScript(redriveLua + `
for i = 4, #ARGV do
  local m = redis.call('HGET', KEYS[1], ARGV[i])
  if m then
    redriveDead(ARGV[i], m)
  end
end
` + redriveDone)

// Redrive implements sender.Queue.
func (q *Queue) Redrive(ctx context.Context, dest string, ids []string, redriveID string, now time.Time) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if err := q.CheckLayout(ctx); err != nil {
		return nil, err
	}
	if len(redriveID) >= 128 {
		return nil, fmt.Errorf("redis redrive: a redrive ID of %d bytes (the record keeps under 128)", len(redriveID))
	}
	k := keysOf(q.prefix, dest)
	args := []any{ms(now), redriveID, binary.BigEndian.AppendUint64(nil, uint64(ms(now)))}
	for _, id := range ids {
		args = append(args, id)
	}
	moved, err := redriveScript.Run(ctx, q.rdb, []string{k.meta, k.dead, k.ready, k.rdc, k.rdt}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redis redrive: %w", err)
	}
	return moved, nil
}

// RedriveCounts implements sender.Queue.
func (q *Queue) RedriveCounts(ctx context.Context, dest, redriveID string) (sender.RedriveCounts, error) {
	k := keysOf(q.prefix, dest)
	v, err := q.rdb.HMGet(ctx, k.rdc, redriveID+":m", redriveID+":d", redriveID+":x", redriveID+":s").Result()
	if err != nil {
		return sender.RedriveCounts{}, fmt.Errorf("redis redrive counts: %w", err)
	}
	n := func(i int) int {
		s, _ := str(v[i])
		x, _ := strconv.Atoi(s)
		return x
	}
	return sender.RedriveCounts{Moved: n(0), Delivered: n(1), DeadAgain: n(2), Superseded: n(3)}, nil
}

// purgeScript deletes dead letters, and their history entries and any
// payload kept under their IDs: a purged letter is not listed.
//
//	KEYS  meta, body, log, dead, hidx, hist, hpay, hpayt
//	ARGV  ids
//	returns how many went
var purgeScript = redis.NewScript(`
local n = 0
for i = 1, #ARGV do
  if redis.call('ZREM', KEYS[4], ARGV[i]) == 1 then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('HDEL', KEYS[3], ARGV[i])
    local eid = redis.call('HGET', KEYS[5], ARGV[i])
    if eid then
      redis.call('XDEL', KEYS[6], eid)
      redis.call('HDEL', KEYS[5], ARGV[i])
    end
    redis.call('HDEL', KEYS[7], ARGV[i])
    redis.call('ZREM', KEYS[8], ARGV[i])
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
	if err := q.CheckLayout(ctx); err != nil {
		return 0, err
	}
	k := keysOf(q.prefix, dest)
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	n, err := purgeScript.Run(ctx, q.rdb, []string{k.meta, k.body, k.log, k.dead, k.hidx, k.hist, k.hpay, k.hpayt}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redis purge: %w", err)
	}
	return n, nil
}

// Destinations implements sender.Queue.
func (q *Queue) Destinations(ctx context.Context) ([]string, error) {
	names, err := q.rdb.SMembers(ctx, destsKey(q.prefix)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis destinations: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

// movePage is how many envelopes one step of a Move reads.
const movePage = 200

// movePageScript reads a page of one index of a destination, from an
// offset (the envelopes kept there by earlier pages), with each
// envelope's parts.
//
//	KEYS  index, meta, body, log
//	ARGV  "list", "zset" or "leases", offset, n, now ms ("" for Redis's
//	      clock): of leases, only those ended by now
//	returns {ids..., scores..., records..., payloads..., logs...} (a list's
//	scores are 0)
var movePageScript = redis.NewScript(`
local off, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local ids, scores = {}, {}
if ARGV[1] == 'list' then
  ids = redis.call('LRANGE', KEYS[1], off, off + n - 1)
  for i = 1, #ids do
    scores[i] = 0
  end
elseif ARGV[1] == 'leases' then
  local now = tonumber(ARGV[4])
  if ARGV[4] == '' then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local r = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', off, n)
  for i = 1, #r, 2 do
    table.insert(ids, r[i])
    table.insert(scores, r[i+1])
  end
else
  local r = redis.call('ZRANGE', KEYS[1], off, off + n - 1, 'WITHSCORES')
  for i = 1, #r, 2 do
    table.insert(ids, r[i])
    table.insert(scores, r[i+1])
  end
end
if #ids == 0 then
  return {}
end
local out = {}
for _, id in ipairs(ids) do table.insert(out, id) end
for _, s in ipairs(scores) do table.insert(out, s) end
for _, k in ipairs({KEYS[2], KEYS[3], KEYS[4]}) do
  for _, v in ipairs(redis.call('HMGET', k, unpack(ids))) do
    table.insert(out, v)
  end
end
return out
`)

// moveInScript writes envelopes moved from another destination, unless
// it holds their IDs already.
//
//	KEYS  meta, body, log, ready, dead, hidx, hist
//	ARGV  per envelope: id, "x" (dead) or "q", dead-at ms, record,
//	      payload, log
//	returns per envelope: 1 written, 0 held already with the same
//	payload, -1 held with another
var moveInScript = redis.NewScript(`
local out = {}
for i = 1, #ARGV, 6 do
  local id, state, score, rec, body, log = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4], ARGV[i+5]
  local fp = string.sub(rec, 2, 9)
  local cur = redis.call('HGET', KEYS[1], id)
  local done
  local eid = (not cur) and redis.call('HGET', KEYS[6], id)
  local e = eid and redis.call('XRANGE', KEYS[7], eid, eid)[1]
  if e and e[2][4] == 'd' then
    done = string.sub(e[2][6], 2, 9)
  end
  if cur then
    table.insert(out, (string.sub(cur, 2, 9) == fp) and 0 or -1)
  elseif done then
    table.insert(out, (done == fp) and 0 or -1)
  else
    redis.call('HSET', KEYS[1], id, rec)
    redis.call('HSET', KEYS[2], id, body)
    if log ~= '' then
      redis.call('HSET', KEYS[3], id, log)
    end
    if state == 'x' then
      redis.call('ZADD', KEYS[5], score, id)
    else
      redis.call('RPUSH', KEYS[4], id)
    end
    table.insert(out, 1)
  end
end
return out
`)

// moveOutScript deletes envelopes moved to another destination.
//
//	KEYS  meta, body, log, index
//	ARGV  "list" or "zset", ids
var moveOutScript = redis.NewScript(`
for i = 2, #ARGV do
  local id = ARGV[i]
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  if ARGV[1] == 'list' then
    redis.call('LREM', KEYS[4], 1, id)
  else
    redis.call('ZREM', KEYS[4], id)
  end
end
return 0
`)

// Move implements sender.Queue. The two destinations' keys are in
// different Cluster slots, so it moves a page at a time in three steps:
// read from from, write into to (unless to holds the ID), delete from
// from. A move cut short between the last two leaves a copy in both; the
// next Move finds to holding it with the same payload, and deletes it
// from from. Move while no instance delivers from: a lease taken
// meanwhile would be delivered from both.
func (q *Queue) Move(ctx context.Context, from, to string, now time.Time) (moved, kept int, err error) {
	if from == to {
		return 0, 0, fmt.Errorf("redis move: %q to itself", from)
	}
	if err := q.CheckLayout(ctx); err != nil {
		return 0, 0, err
	}
	if err := q.register(ctx, to); err != nil {
		return 0, 0, fmt.Errorf("redis move: %w", err)
	}
	src, dst := keysOf(q.prefix, from), keysOf(q.prefix, to)
	clock := "" // Redis's: a live lease stays for its holder to settle
	if q.callerClock {
		clock = strconv.FormatInt(ms(now), 10)
	}
	for _, ix := range []struct{ key, kind, state string }{
		{src.ready, "list", "q"}, {src.due, "zset", "q"}, {src.leased, "leases", "q"}, {src.dead, "zset", "x"},
	} {
		offset := 0 // the envelopes of this index kept in from
		for {
			v, err := movePageScript.Run(ctx, q.rdb, []string{ix.key, src.meta, src.body, src.log}, ix.kind, offset, movePage, clock).Slice()
			if err != nil {
				return moved, kept, fmt.Errorf("redis move: reading %s: %w", from, err)
			}
			n := len(v) / 5
			if n == 0 {
				break
			}
			var in []any
			var ids []string
			for i := range n {
				id, _ := str(v[i])
				rec, ok := str(v[2*n+i])
				if !ok {
					// An index entry without its envelope: nothing to move;
					// the out step drops the entry.
					ids = append(ids, id)
					continue
				}
				m, err := sender.UnmarshalMeta(to, id, []byte(rec))
				if err != nil {
					// Stays in from, where it is listed as broken.
					kept++
					offset++
					continue
				}
				body, _ := str(v[3*n+i])
				log, _ := str(v[4*n+i])
				score, _ := str(v[n+i])
				in = append(in, id, ix.state, score, sender.MarshalMeta(m), body, log)
				ids = append(ids, id)
			}
			var out []any
			if len(in) > 0 {
				res, err := moveInScript.Run(ctx, q.rdb, []string{dst.meta, dst.body, dst.log, dst.ready, dst.dead, dst.hidx, dst.hist}, in...).Int64Slice()
				if err != nil {
					return moved, kept, fmt.Errorf("redis move: writing %s: %w", to, err)
				}
				for j, r := range res {
					id := in[6*j].(string)
					if r < 0 {
						kept++
						offset++
						ids = slices.DeleteFunc(ids, func(x string) bool { return x == id })
						continue
					}
					moved++
				}
			}
			out = append(out, ix.kind)
			for _, id := range ids {
				out = append(out, id)
			}
			if len(out) > 1 {
				if err := moveOutScript.Run(ctx, q.rdb, []string{src.meta, src.body, src.log, ix.key}, out...).Err(); err != nil {
					return moved, kept, fmt.Errorf("redis move: deleting from %s: %w", from, err)
				}
			}
		}
	}
	// The history goes too: what was delivered under from is found,
	// shown, resent and trimmed under to, and the enqueue stays idempotent
	// under the new name.
	if err := q.moveHistory(ctx, src, dst); err != nil {
		return moved, kept, fmt.Errorf("redis move: the history: %w", err)
	}
	if err := q.moveRedriveCounts(ctx, src, dst); err != nil {
		return moved, kept, fmt.Errorf("redis move: redrive counts: %w", err)
	}
	// What is leased and live stays, for its holder to settle.
	live, err := q.rdb.ZCard(ctx, src.leased).Result()
	if err != nil {
		return moved, kept, fmt.Errorf("redis move: %w", err)
	}
	return moved, kept + int(live), nil
}

// mergeCountsScript adds another destination's redrive counts.
//
//	KEYS  rdc, rdt
//	ARGV  n fields, then field, count pairs, then redrive id, first moved
//	      at pairs
var mergeCountsScript = redis.NewScript(`
local n = tonumber(ARGV[1])
for i = 2, 1 + 2 * n, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i+1])
end
for i = 2 + 2 * n, #ARGV, 2 do
  redis.call('ZADD', KEYS[2], 'NX', ARGV[i+1], ARGV[i])
end
return 0
`)

// moveRedriveCounts adds from's redrive counts to to's, then forgets
// them in from: the letters they count are to's now.
func (q *Queue) moveRedriveCounts(ctx context.Context, src, dst keys) error {
	counts, err := q.rdb.HGetAll(ctx, src.rdc).Result()
	if err != nil || len(counts) == 0 {
		return err
	}
	times, err := q.rdb.ZRangeWithScores(ctx, src.rdt, 0, -1).Result()
	if err != nil {
		return err
	}
	args := []any{len(counts)}
	for f, n := range counts {
		args = append(args, f, n)
	}
	for _, z := range times {
		args = append(args, z.Member, int64(z.Score))
	}
	if err := mergeCountsScript.Run(ctx, q.rdb, []string{dst.rdc, dst.rdt}, args...).Err(); err != nil {
		return err
	}
	return q.rdb.Del(ctx, src.rdc, src.rdt).Err()
}

// Drop implements sender.Queue.
func (q *Queue) Drop(ctx context.Context, dest string) (int, error) {
	if err := q.CheckLayout(ctx); err != nil {
		return 0, err
	}
	k := keysOf(q.prefix, dest)
	n, err := q.rdb.HLen(ctx, k.meta).Result()
	if err != nil {
		return 0, fmt.Errorf("redis drop: %w", err)
	}
	// One DEL of keys that share a hash tag: one slot.
	if err := q.rdb.Del(ctx, k.meta, k.body, k.log, k.ready, k.due, k.leased, k.dead,
		k.paused, k.corrupt, k.rdc, k.rdt, k.hist, k.hidx, k.hpay, k.hpayt, k.histmv, k.histmvidx).Err(); err != nil {
		return 0, fmt.Errorf("redis drop: %w", err)
	}
	if err := q.rdb.SRem(ctx, destsKey(q.prefix), dest).Err(); err != nil {
		return int(n), fmt.Errorf("redis drop: %w", err)
	}
	if err := q.rdb.HDel(ctx, sinceKey(q.prefix), dest).Err(); err != nil {
		return int(n), fmt.Errorf("redis drop: %w", err)
	}
	q.registered.Delete(dest)
	return int(n), nil
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

// FirstSeen implements sender.Queue: HSETNX, then one HMGET.
func (q *Queue) FirstSeen(ctx context.Context, dests []string, now time.Time) (map[string]time.Time, error) {
	if len(dests) == 0 {
		return map[string]time.Time{}, nil
	}
	if err := q.CheckLayout(ctx); err != nil {
		return nil, err
	}
	key := sinceKey(q.prefix)
	pipe := q.rdb.Pipeline()
	for _, d := range dests {
		pipe.HSetNX(ctx, key, d, ms(now))
	}
	got := pipe.HMGet(ctx, key, dests...)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redis first seen: %w", err)
	}
	out := make(map[string]time.Time, len(dests))
	for i, v := range got.Val() {
		s, _ := v.(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redis first seen of %q: %q is not unix ms", dests[i], s)
		}
		out[dests[i]] = time.UnixMilli(n)
	}
	return out, nil
}

// entryTime is when a history entry settled: its ID's milliseconds.
func entryTime(eid string) time.Time {
	msPart, _, _ := strings.Cut(eid, "-")
	n, _ := strconv.ParseInt(msPart, 10, 64)
	return time.UnixMilli(n)
}

// historyScan bounds the history entries one History call looks at.
const historyScan = 1000

// historyScript reads history entries newest first, from before a cursor,
// keeping only each ID's newest entry.
//
//	KEYS  hist, hidx
//	ARGV  from ("+", or "(" and the last entry ID read), count
//	returns {the last entry ID looked at or "", then per entry kept: entry
//	ID, id, state, record}
var historyScript = redis.NewScript(`
local out = {''}
local es = redis.call('XREVRANGE', KEYS[1], ARGV[1], '-', 'COUNT', ARGV[2])
for _, e in ipairs(es) do
  out[1] = e[1]
  local id = e[2][2]
  if redis.call('HGET', KEYS[2], id) == e[1] then
    table.insert(out, e[1])
    table.insert(out, id)
    table.insert(out, e[2][4])
    table.insert(out, e[2][6])
  end
end
if #es < tonumber(ARGV[2]) then out[1] = '' end
return out
`)

// History implements sender.Queue: it reads the history stream from the
// newest entry, or from before the cursor (an entry ID), up to
// historyScan entries, and filters their records here.
func (q *Queue) History(ctx context.Context, dest string, f sender.HistoryFilter, cursor string, limit int) ([]*sender.Meta, string, error) {
	k := keysOf(q.prefix, dest)
	if limit <= 0 {
		limit = 100
	}
	from := "+"
	if cursor != "" {
		if !historyCursor.MatchString(cursor) {
			return nil, "", fmt.Errorf("%w: cursor %q", sender.ErrBadFilter, cursor)
		}
		from = "(" + cursor
	}
	if !f.Until.IsZero() && from == "+" {
		from = strconv.FormatInt(ms(f.Until)-1, 10)
	}
	if ids := f.Lookup(); ids != nil {
		return q.lookup(ctx, k, dest, f, ids, cursor, limit)
	}
	var out []*sender.Meta
	for scanned := 0; scanned < historyScan; {
		n := min(historyScan-scanned, max(2*limit, 100))
		v, err := historyScript.Run(ctx, q.rdb, []string{k.hist, k.hidx}, from, n).Slice()
		if err != nil {
			return nil, "", fmt.Errorf("redis history: %w", err)
		}
		scanned += n
		last, _ := str(v[0])
		for i := 1; i+3 < len(v); i += 4 {
			m := historyEntry(dest, v[i:i+4])
			if !f.Since.IsZero() && m.SettledAt.Before(f.Since) {
				return out, "", nil // older entries only from here
			}
			if !f.Match(m) {
				continue
			}
			out = append(out, m)
			if len(out) == limit {
				return out, m.HistoryID, nil
			}
		}
		if last == "" {
			return out, "", nil
		}
		from = "(" + last
	}
	return out, strings.TrimPrefix(from, "("), nil
}

// historyCursor is a history entry ID.
var historyCursor = regexp.MustCompile(`^[0-9]+-[0-9]+$`)

// resendScript moves settled envelopes back to the ready list under a
// redrive ID: a dead letter as redriveScript does, a delivered one from
// the history while its payload is kept (its time not before now), its
// record rewritten as a dead letter's is.
//
//	KEYS  meta, dead, ready, rdc, rdt, body, log, hidx, hist, hpay, hpayt
//	ARGV  now ms, redrive id, now as 8 bytes (big-endian ms), then ids
//	returns the IDs moved
var resendScript = redis.NewScript(redriveLua + `
for i = 4, #ARGV do
  local id = ARGV[i]
  local m = redis.call('HGET', KEYS[1], id)
  if m then
    redriveDead(id, m)
  else
    local eid = redis.call('HGET', KEYS[8], id)
    local e = eid and redis.call('XRANGE', KEYS[9], eid, eid)[1]
    local untilMs = redis.call('ZSCORE', KEYS[11], id)
    local body = untilMs and tonumber(untilMs) >= tonumber(ARGV[1]) and redis.call('HGET', KEYS[10], id)
    local h = e and e[2]
    if h and h[4] == 'd' and body and #h[6] >= 18 and string.byte(h[6], 1) == 2 then
      local rec = redriven(h[6])
      redis.call('HSET', KEYS[1], id, rec)
      redis.call('HSET', KEYS[6], id, body)
      if h[8] ~= '' then
        redis.call('HSET', KEYS[7], id, h[8])
      end
      redis.call('HDEL', KEYS[10], id)
      redis.call('ZREM', KEYS[11], id)
      redis.call('RPUSH', KEYS[3], id)
      table.insert(moved, id)
    end
  end
end
` + redriveDone)

// Resend implements sender.Queue.
func (q *Queue) Resend(ctx context.Context, dest string, ids []string, redriveID string, now time.Time) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(redriveID) >= 128 {
		return nil, fmt.Errorf("redis resend: a redrive ID of %d bytes (the record keeps under 128)", len(redriveID))
	}
	k := keysOf(q.prefix, dest)
	args := []any{ms(now), redriveID, binary.BigEndian.AppendUint64(nil, uint64(ms(now)))}
	for _, id := range ids {
		args = append(args, id)
	}
	moved, err := resendScript.Run(ctx, q.rdb, []string{k.meta, k.dead, k.ready, k.rdc, k.rdt, k.body, k.log, k.hidx, k.hist, k.hpay, k.hpayt}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redis resend: %w", err)
	}
	return moved, nil
}

// historyMeta is e's record as the history keeps it: without its trace
// context, which served its deliveries (about 60 bytes of the 300 a
// delivered envelope may cost); a resend starts a trace of its own.
func historyMeta(e *sender.Envelope) *sender.Meta {
	m := sender.MetaOf(e)
	m.TraceParent, m.TraceState = "", ""
	return m
}
