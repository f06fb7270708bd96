// Package redisqueue is the Redis sender.Queue: one go-redis
// UniversalClient (single node, Sentinel or Cluster), each destination's
// keys under one hash tag, every step one Lua script; a lease and a
// settlement each move a whole batch in one round trip.
package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/replicas"
	"github.com/hookgate/hookgate/sender"
)

// Queue is a sender.Queue on Redis.
type Queue struct {
	rdb         redis.UniversalClient
	prefix      string
	retention   time.Duration
	history     sender.History
	callerClock bool
	repl        *replicas.Waiter // nil: writes wait for no replica

	registered    sync.Map    // destination names known to be in the dests SET
	keys          sync.Map    // destination name -> *keys
	ordering      sync.Map    // destination name -> sender.Ordering
	layoutChecked atomic.Bool // CheckLayout answered nil
}

// New returns a Queue whose keys start with prefix. Delivered IDs and dead
// letters are kept for retention. Leases are judged by Redis's clock
// (TIME), so that an instance whose clock runs ahead cannot take over a
// live lease.
func New(rdb redis.UniversalClient, prefix string, retention time.Duration) *Queue {
	return &Queue{rdb: rdb, prefix: prefix, retention: retention, history: sender.History{Keep: retention}}
}

// WaitForReplicas makes the enqueue, settle, redrive, resend and purge
// wait for w's replicas (min_replicas): an enqueue they did not
// acknowledge in time fails, the others are counted. Call it before
// first use.
func (q *Queue) WaitForReplicas(w *replicas.Waiter) { q.repl = w }

// run runs script, a write of op; with WaitForReplicas, followed by WAIT
// on the same connection (replicas.Waiter.Run).
func (q *Queue) run(ctx context.Context, op replicas.Op, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if q.repl == nil {
		return script.Run(ctx, q.rdb, keys, args...)
	}
	return q.repl.Run(ctx, op, script, keys, args...)
}

// eval runs script as run does, and returns how many replicas
// acknowledged it, for the caller to judge (replicas.Waiter.Eval).
func (q *Queue) eval(ctx context.Context, script *redis.Script, keys []string, args ...any) (*redis.Cmd, int) {
	if q.repl == nil {
		return script.Run(ctx, q.rdb, keys, args...), 0
	}
	return q.repl.Eval(ctx, script, keys, args...)
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
//	KEYS  meta, body, leased, dead, paused, ready, due, hidx, hist, ents, oc
//	ARGV  id, record, payload, due ms, now ms, history ms, the entity it
//	      joins ("": none, it is not ordered), the entity lists' prefix
//	returns {state, mismatch, first}: mismatch -1 when added, 0 a duplicate
//	of the same payload, 1 of another payload; first 1 when the envelope
//	added is the only one the destination holds (its name is registered
//	again: another instance may have dropped it)
var enqueueScript = redis.NewScript(orderLua + `
O.ep, O.ents, O.oc, O.meta, O.ready, O.due = ARGV[8], KEYS[10], KEYS[11], KEYS[1], KEYS[6], KEYS[7]
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
if ARGV[7] ~= '' then
  join(ARGV[1], ARGV[7], tonumber(ARGV[4]), tonumber(ARGV[5]))
else
  makeDue(ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5]))
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
	entity := ""
	if q.orderOf(e.Destination).ByEntity {
		entity = e.Entity
	}
	cmd, acked := q.eval(ctx, enqueueScript, []string{k.meta, k.body, k.leased, k.dead, k.paused, k.ready, k.due, k.hidx, k.hist, k.ents, k.oc},
		e.ID, sender.MarshalMeta(sender.MetaOf(e)), sender.StoredPayload(e), ms(e.NextAt), ms(e.CreatedAt), q.history.Keep.Milliseconds(),
		entity, k.ent)
	v, err := cmd.Slice()
	if err != nil {
		return sender.EnqueueResult{}, fmt.Errorf("redis enqueue: %w", err)
	}
	state, _ := v[0].(string)
	m, _ := v[1].(int64)
	if len(v) > 2 && v[2] == int64(1) {
		// The destination's first envelope: its name goes into the SET
		// again, whatever this process remembers (a Drop elsewhere).
		// Before the replicas are judged: a refused enqueue is on the
		// master all the same, and its retry, a duplicate, is not first.
		q.registered.Delete(e.Destination)
		if err := q.register(ctx, e.Destination); err != nil {
			return sender.EnqueueResult{}, fmt.Errorf("redis enqueue: %w", err)
		}
	}
	switch {
	case m < 0: // added: its WAIT judges it
		err = q.repl.Check(replicas.Enqueue, acked)
	case m == 0 && q.repl != nil:
		// A duplicate wrote nothing, so its WAIT says nothing of the
		// original, which another connection wrote: its answer (202)
		// waits for a fence. (A mismatch, 422, vouches for nothing.)
		err = q.repl.Fence(ctx, replicas.Enqueue, k.meta)
	}
	if err != nil {
		return sender.EnqueueResult{}, fmt.Errorf("redis enqueue: %w", err)
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

// dueScript answers 1 when the lease script would lease something now:
// not paused, and an envelope ready, a retry due or a lease expired (by
// Redis's clock, unless told to use the caller's). It writes nothing.
//
//	KEYS  due, leased, paused, ready
//	ARGV  now ms (the caller's), "1" to judge leases by it too
var dueScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
if redis.call('LLEN', KEYS[4]) > 0 then
  return 1
end
local now = tonumber(ARGV[1])
if #redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1) > 0 then
  return 1
end
local lnow = now
if ARGV[2] ~= '1' then
  local t = redis.call('TIME')
  lnow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if #redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', lnow, 'LIMIT', 0, 1) > 0 then
  return 1
end
return 0
`)

// Due implements sender.Queue: one script per destination, sent in one
// pipeline (split by slot on a Cluster). A destination whose script
// failed is left out, and the first such failure answered beside the
// others' result.
func (q *Queue) Due(ctx context.Context, dests []string, now time.Time) ([]string, error) {
	caller := ""
	if q.callerClock {
		caller = "1"
	}
	keys, args := make([][]string, len(dests)), make([][]any, len(dests))
	for i, dest := range dests {
		k := q.prefix + ":q:{" + dest + "}:" // four of keysOf's: an idle destination's keys are not cached
		keys[i], args[i] = []string{k + "due", k + "leased", k + "paused", k + "ready"}, []any{ms(now), caller}
	}
	var out []string
	var first error
	for i, c := range q.evalEach(ctx, dueScript, keys, args) {
		n, err := c.Int()
		if err != nil && first == nil {
			first = fmt.Errorf("redis due: %w", err)
		}
		if err == nil && n == 1 {
			out = append(out, dests[i])
		}
	}
	return out, first
}

// evalEach runs script once for each keys[i] and args[i], in one
// pipeline, as EVALSHA; the calls a node answered NOSCRIPT (restarted,
// promoted, new to the Cluster) are sent again once the script is loaded.
// Each call's answer is its own: one failing leaves the others'.
func (q *Queue) evalEach(ctx context.Context, script *redis.Script, keys [][]string, args [][]any) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(keys))
	send := func(idx []int) {
		_, _ = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range idx {
				cmds[i] = script.EvalSha(ctx, p, keys[i], args[i]...)
			}
			return nil
		}) // each command holds its own error
	}
	all := make([]int, len(keys))
	for i := range all {
		all[i] = i
	}
	send(all)
	var again []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 && script.Load(ctx, q.rdb).Err() == nil {
		send(again)
	}
	return cmds
}

// quarantineScript sets aside leased entries that do not decode.
//
// An entity's head set aside lets the next go: its entity is read from
// its record, or else looked for among the entities' heads.
//
//	KEYS  leased, meta, body, log, corrupt, ents, oc, ready, due
//	ARGV  now ms, the entity lists' prefix, ids
var quarantineScript = redis.NewScript(orderLua + `
O.ep, O.ents, O.oc, O.meta, O.ready, O.due = ARGV[2], KEYS[6], KEYS[7], KEYS[2], KEYS[8], KEYS[9]
local now = tonumber(ARGV[1])
for i = 3, #ARGV do
  local id = ARGV[i]
  redis.call('ZREM', KEYS[1], id)
  local m = redis.call('HGET', KEYS[2], id)
  if m then
    redis.call('HSET', KEYS[5], id, m)
  end
  local ent = headOf(id, m)
  if not ent and not entityOf(m) then
    for _, e in ipairs(redis.call('SMEMBERS', O.ents)) do
      if redis.call('LINDEX', O.ep .. e, 0) == id then
        ent = e
        break
      end
    end
  end
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[4], id)
  if ent then
    leave(id, ent, now)
  end
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
	return sender.Assemble(rec, []byte(payload), attempts)
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
		args := append([]any{ms(now), k.ent}, bad...)
		if err := quarantineScript.Run(ctx, q.rdb, []string{k.leased, k.meta, k.body, k.log, k.corrupt, k.ents, k.oc, k.ready, k.due}, args...).Err(); err != nil {
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
// An entity's head that is delivered, or dies unless held, lets the next
// go (orderLua); so does a held one the retention forgets.
//
//	KEYS  meta, body, log, due, leased, dead, ready, rdc, rdt, hist, hidx,
//	      hpay, hpayt, ents, oc
//	ARGV  now ms, retention ms, history ms, payload ms, the record's
//	      redrive ID offset (recordRedrive), "1" when a dead head holds its
//	      entity, the entity lists' prefix, then per outcome:
//	      kind (d delivered, r retry, x dead, l release), id, lease end ms,
//	      record or "", log or "", score (due or dead-at ms)
//	returns the number of outcomes skipped (their lease was lost)
var settleScript = redis.NewScript(trimHistoryLua + orderLua + `
O.ep, O.ents, O.oc, O.meta, O.ready, O.due = ARGV[7], KEYS[14], KEYS[15], KEYS[1], KEYS[7], KEYS[4]
local hold = ARGV[6] == '1'
local now = tonumber(ARGV[1])
local keepPayload = tonumber(ARGV[4]) > 0
local rdOff = tonumber(ARGV[5])
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
for i = 8, #ARGV, 6 do
  local kind, id, lu, rec, log, score = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4], ARGV[i+5]
  local cur = not seen[id] and redis.call('ZSCORE', KEYS[5], id)
  if not cur or tonumber(cur) ~= tonumber(lu) then
    skipped = skipped + 1
  else
    seen[id] = true
    table.insert(unleased, id)
    local m = redis.call('HGET', KEYS[1], id)
    local rid = ''
    if m and #m > rdOff then
      rid = string.sub(m, rdOff + 2, rdOff + 1 + string.byte(m, rdOff + 1))
    end
    if rid ~= '' then
      -- counts written again after their trim are dated, and trimmed
      redis.call('ZADD', KEYS[9], 'NX', ARGV[1], rid)
    end
    local ent = (kind == 'd' or kind == 'x') and headOf(id, m)
    if ent and kind == 'x' and hold then
      held()
    elseif ent then
      leave(id, ent, now)
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
  for _, id in ipairs(old) do
    local ent = headOf(id, redis.call('HGET', KEYS[1], id))
    if ent then
      unheld()
      leave(id, ent, now)
    end
  end
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
	args := make([]any, 0, 7+6*len(outcomes))
	args = append(args, ms(now), q.retention.Milliseconds(), q.history.Keep.Milliseconds(), min(q.history.Payload, q.history.Keep).Milliseconds(), recordRedrive,
		flag(q.orderOf(dest).Hold), k.ent)
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
	n, err := q.run(ctx, replicas.Settle, settleScript, k.settleKeys(), args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redis settle: %w", err)
	}
	return n, nil
}

// settleKeys is settleScript's KEYS.
func (k keys) settleKeys() []string {
	return []string{k.meta, k.body, k.log, k.due, k.leased, k.dead, k.ready, k.rdc, k.rdt,
		k.hist, k.hidx, k.hpay, k.hpayt, k.ents, k.oc}
}

// trimDead runs settleScript without outcomes, for its trim alone: the
// dead letters past the retention go, and the entities they held are
// released, whether or not anything settles. It answers when the next
// dead letter is due to go (zero: none is kept).
func (q *Queue) trimDead(ctx context.Context, dest string, now time.Time) (time.Time, error) {
	k := keysOf(q.prefix, dest) // not cached: every destination is trimmed, idle or not
	next := func() (time.Time, error) {
		oldest, err := q.rdb.ZRangeWithScores(ctx, k.dead, 0, 0).Result()
		if err != nil || len(oldest) == 0 {
			return time.Time{}, err
		}
		return time.UnixMilli(int64(oldest[0].Score)).Add(q.retention), nil
	}
	due, err := next()
	if err != nil || due.IsZero() || due.After(now) {
		return due, err
	}
	if err := q.run(ctx, replicas.Settle, settleScript, k.settleKeys(), ms(now), q.retention.Milliseconds(), q.history.Keep.Milliseconds(),
		min(q.history.Payload, q.history.Keep).Milliseconds(), recordRedrive, flag(q.orderOf(dest).Hold), k.ent).Err(); err != nil {
		return time.Time{}, err
	}
	return next()
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
//	KEYS  due, leased, dead, paused, ready, meta, corrupt, hidx, oc
//	ARGV  now ms
//	returns {queued, leased, dead, who paused it or false, oldest
//	scheduled due ms or -1, oldest dead ms or -1, corrupt, history entries
//	(HLEN of hidx: one per settled ID, O(1)), the record at the head of
//	the ready list or false, waiting, held}
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
return {redis.call('ZCARD', KEYS[1]) + redis.call('LLEN', KEYS[5]) + tonumber(redis.call('HGET', KEYS[9], 'w') or 0), redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]), redis.call('GET', KEYS[4]), oldest, oldestDead, redis.call('HLEN', KEYS[7]),
  redis.call('HLEN', KEYS[8]), head or false, tonumber(redis.call('HGET', KEYS[9], 'w') or 0),
  tonumber(redis.call('HGET', KEYS[9], 'h') or 0)}
`)

// Stats implements sender.Queue.
func (q *Queue) Stats(ctx context.Context, dest string, now time.Time) (sender.Stats, error) {
	k := keysOf(q.prefix, dest)
	v, err := statsScript.Run(ctx, q.rdb, []string{k.due, k.leased, k.dead, k.paused, k.ready, k.meta, k.corrupt, k.hidx, k.oc}, ms(now)).Slice()
	if err != nil {
		return sender.Stats{}, fmt.Errorf("redis stats: %w", err)
	}
	n := func(i int) int64 { x, _ := v[i].(int64); return x }
	s := sender.Stats{Queued: int(n(0)), Leased: int(n(1)), Dead: int(n(2)), Corrupt: int(n(6)), History: int(n(7)),
		Waiting: int(n(9)), Held: int(n(10))}
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

// Destinations implements sender.Queue.
func (q *Queue) Destinations(ctx context.Context) ([]string, error) {
	names, err := q.rdb.SMembers(ctx, destsKey(q.prefix)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis destinations: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

var _ sender.Queue = (*Queue)(nil)

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

// Order implements sender.Queue.
func (q *Queue) Order(dest string, o sender.Ordering) { q.ordering.Store(dest, o) }

// orderOf is dest's ordering (Order).
func (q *Queue) orderOf(dest string) sender.Ordering {
	o, _ := q.ordering.Load(dest)
	v, _ := o.(sender.Ordering)
	return v
}
