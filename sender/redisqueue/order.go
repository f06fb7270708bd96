package redisqueue

// Ordered delivery (sender.Ordering). An entity's unsettled envelopes
// wait in a LIST, its head first; only the head is in the ready list, the
// due set, the leased set or (held) the dead set. The scripts that
// settle, redrive, purge or set aside an envelope hand the entity on to
// its next envelope with the functions of orderLua.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/sender"
)

// orderLua defines the functions the scripts share, over the table O
// each script fills in first: O.ep, the entity lists' key prefix
// (keys.ent); O.ents, O.oc, O.meta, O.ready and O.due, the keys of
// those names.
//
//	entityOf(m)           the entity of record m; nil when m does not decode
//	join(id, ent, at, now) id joins the back of ent: due at at when it is
//	                      the head, else it waits
//	headOf(id, m)         id's entity when id is its head, else nil
//	leave(id, ent, now)   the head id leaves ent, and the next is due
//	held(ent)             counts ent held (a dead head that holds it)
//	unheld()              counts one entity less held
var orderLua = fmt.Sprintf(`
local O = {}
local RECORD, NEXTAT, RDOFF = %d, %d, %d
local function uvarint(s, i)
  local n, mul = 0, 1
  while true do
    local b = string.byte(s, i)
    if not b or mul > 2^49 then
      return nil
    end
    i = i + 1
    n = n + (b %% 128) * mul
    if b < 128 then
      return n, i
    end
    mul = mul * 128
  end
end
local function entityOf(m)
  if not m or #m <= RDOFF or string.byte(m, 1) ~= RECORD then
    return nil
  end
  local i = RDOFF + 1
  for _ = 1, 2 do -- the redrive ID and the event type
    local n
    n, i = uvarint(m, i)
    if not n then
      return nil
    end
    i = i + n
  end
  local n
  n, i = uvarint(m, i)
  if not n or i + n - 1 > #m then
    return nil
  end
  return string.sub(m, i, i + n - 1)
end
local function nextAtOf(m)
  local at = 0
  for i = NEXTAT + 1, NEXTAT + 8 do
    at = at * 256 + string.byte(m, i)
  end
  return at
end
local function makeDue(id, at, now)
  if at <= now then
    redis.call('RPUSH', O.ready, id)
  else
    redis.call('ZADD', O.due, at, id)
  end
end
local function join(id, ent, at, now)
  if redis.call('RPUSH', O.ep .. ent, id) == 1 then
    redis.call('SADD', O.ents, ent)
    makeDue(id, at, now)
  else
    redis.call('HINCRBY', O.oc, 'w', 1)
  end
end
local function headOf(id, m)
  local ent = entityOf(m)
  if ent and ent ~= '' and redis.call('LINDEX', O.ep .. ent, 0) == id then
    return ent
  end
  return nil
end
local function leave(id, ent, now)
  local key = O.ep .. ent
  redis.call('LPOP', key)
  while true do
    local nxt = redis.call('LINDEX', key, 0)
    if not nxt then
      redis.call('SREM', O.ents, ent)
      return
    end
    redis.call('HINCRBY', O.oc, 'w', -1)
    local m = redis.call('HGET', O.meta, nxt)
    if m and #m >= NEXTAT + 8 then
      makeDue(nxt, nextAtOf(m), now)
      return
    elseif m then
      -- It does not decode: due, the lease sets it aside, and its
      -- entity goes on.
      redis.call('RPUSH', O.ready, nxt)
      return
    end
    redis.call('LPOP', key) -- its envelope is gone: the next
  end
end
local function held()
  redis.call('HINCRBY', O.oc, 'h', 1)
end
local function unheld()
  if tonumber(redis.call('HINCRBY', O.oc, 'h', -1)) < 0 then
    redis.call('HSET', O.oc, 'h', 0)
  end
end
`, recordVersion, recordNextAt, recordRedrive)

// flag is a script's boolean argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// entityKey is the LIST of entity's waiting envelopes, its head first.
func (k keys) entityKey(entity string) string { return k.ent + entity }

// pendingWaiting lists dest's waiting envelopes f matches, entity by
// entity (in byte order), each with Behind and Held, until out holds
// limit or looked reaches sender.MaxPendingScan.
func (q *Queue) pendingWaiting(ctx context.Context, dest string, k keys, f sender.PendingFilter, out []*sender.Meta, seen map[string]bool, looked, limit int) ([]*sender.Meta, error) {
	ents, err := q.rdb.SMembers(ctx, k.ents).Result()
	if err != nil {
		return out, fmt.Errorf("redis pending: %w", err)
	}
	slices.Sort(ents)
	for _, ent := range ents {
		if len(out) >= limit || looked >= sender.MaxPendingScan {
			break
		}
		if f.Entity != "" && ent != f.Entity {
			continue
		}
		ids, err := q.rdb.LRange(ctx, k.entityKey(ent), 0, int64(sender.MaxPendingScan-looked)).Result()
		if err != nil {
			return out, fmt.Errorf("redis pending: %w", err)
		}
		if len(ids) < 2 {
			continue
		}
		looked += len(ids)
		head := ids[0]
		dead, err := q.rdb.ZScore(ctx, k.dead, head).Result()
		isHeld := err == nil && dead > 0
		raws, err := q.rdb.HMGet(ctx, k.meta, ids[1:]...).Result()
		if err != nil {
			return out, fmt.Errorf("redis pending: %w", err)
		}
		for j, id := range ids[1:] {
			raw, ok := str(raws[j])
			if !ok || seen[id] || len(out) == limit {
				continue
			}
			m, err := sender.UnmarshalMeta(dest, id, []byte(raw))
			if err != nil {
				m = sender.BrokenMeta(dest, id, err)
			}
			if !f.Match(m) {
				continue
			}
			seen[id] = true
			m.State, m.Behind, m.Held = sender.StateQueued, head, isHeld
			out = append(out, m)
		}
	}
	return out, nil
}

// flattenScript unorders some of a destination's entities, before a
// Move carries them: each entity's waiting envelopes go to the back of
// the ready list, in their order, behind their head (a head waiting for a
// retry, or whose lease ended, goes to the ready list first: a Move makes
// what it carries due at once); a dead head that held its entity is
// counted held no more. An entity whose head's lease is live stays whole,
// waiting for its holder to settle it: moved, its next would overtake it.
//
//	KEYS  ents, oc, ready, due, dead, leased
//	ARGV  the entity lists' key prefix, now ms, then the entities
//	returns the entities unordered
var flattenScript = redis.NewScript(`
local now = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local ent = ARGV[i]
  local key = ARGV[1] .. ent
  local ids = redis.call('LRANGE', key, 0, -1)
  local lease = #ids > 0 and redis.call('ZSCORE', KEYS[6], ids[1])
  if redis.call('SISMEMBER', KEYS[1], ent) == 1 and not (lease and tonumber(lease) > now) then
    if #ids > 0 then
      if redis.call('ZSCORE', KEYS[5], ids[1]) then
        redis.call('HINCRBY', KEYS[2], 'h', -1)
      elseif lease then
        redis.call('ZREM', KEYS[6], ids[1])
        redis.call('RPUSH', KEYS[3], ids[1])
      elseif redis.call('ZREM', KEYS[4], ids[1]) == 1 then
        redis.call('RPUSH', KEYS[3], ids[1])
      end
      for j = 2, #ids, 1000 do
        redis.call('RPUSH', KEYS[3], unpack(ids, j, math.min(j + 999, #ids)))
      end
      redis.call('HINCRBY', KEYS[2], 'w', 1 - #ids)
    end
    redis.call('SREM', KEYS[1], ent)
    redis.call('DEL', key)
    table.insert(out, ent)
  end
end
if redis.call('SCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
return out
`)

// flatten unorders k's destination's entities (flattenScript), a page of
// SSCAN at a time, by clock (ms). It answers how many envelopes still
// wait behind a live lease, and the entities it unordered.
func (q *Queue) flatten(ctx context.Context, k keys, clock string) (int, map[string]bool, error) {
	flattened := map[string]bool{}
	var cursor uint64
	for {
		ents, next, err := q.rdb.SScan(ctx, k.ents, cursor, "", 100).Result()
		if err != nil {
			return 0, nil, err
		}
		if len(ents) > 0 {
			args := []any{k.ent, clock}
			for _, ent := range ents {
				args = append(args, ent)
			}
			done, err := flattenScript.Run(ctx, q.rdb, []string{k.ents, k.oc, k.ready, k.due, k.dead, k.leased}, args...).StringSlice()
			if err != nil {
				return 0, nil, err
			}
			for _, ent := range done {
				flattened[ent] = true
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	waiting, err := q.rdb.HGet(ctx, k.oc, "w").Int()
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	return waiting, flattened, err
}

// dropEntities deletes k's entity lists, a page at a time.
func (q *Queue) dropEntities(ctx context.Context, k keys) error {
	for {
		ents, err := q.rdb.SPopN(ctx, k.ents, 100).Result()
		if err != nil || len(ents) == 0 {
			return err
		}
		lists := make([]string, len(ents))
		for i, ent := range ents {
			lists[i] = k.entityKey(ent)
		}
		if err := q.rdb.Del(ctx, lists...).Err(); err != nil {
			return err
		}
	}
}
