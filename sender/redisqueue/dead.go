package redisqueue

// Dead letters: the list, the records a scan reads, redrive, purge and the
// redrive audit.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/replicas"
	"github.com/hookgate/hookgate/sender"
)

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
	return metasOf(dest, ids, v), nil
}

// metasOf reads metasScript's answer v for ids of dest.
func metasOf(dest string, ids []string, v []any) []*sender.Meta {
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
	return out
}

// MetasAcross implements sender.Queue: metasScript for each destination,
// in one pipeline (split by slot on a Cluster).
func (q *Queue) MetasAcross(ctx context.Context, dests []string, id string) ([]*sender.Meta, error) {
	keys, args := make([][]string, len(dests)), make([][]any, len(dests))
	for i, dest := range dests {
		k := keysOf(q.prefix, dest)
		keys[i], args[i] = []string{k.meta, k.leased, k.dead, k.paused, k.hidx, k.hist}, []any{id}
	}
	out := make([]*sender.Meta, len(dests))
	for i, c := range q.evalEach(ctx, metasScript, keys, args) {
		v, err := c.Slice()
		if err != nil {
			return nil, fmt.Errorf("redis metas: %w", err)
		}
		if ms := metasOf(dests[i], []string{id}, v); len(ms) > 0 {
			out[i] = ms[0]
		}
	}
	return out, nil
}

// The fixed places of a stored record (sender.MarshalMeta), which the
// scripts that read or rewrite one in place are given in ARGV, so that a
// new record version cannot leave them reading the old one's bytes: its
// version byte, where its next time starts (8 bytes, big-endian unix ms,
// just before the redrive ID) and where its redrive ID's length byte is
// (0-based, sender.MetaRedriveOffset).
var (
	recordVersion = int(sender.MarshalMeta(&sender.Meta{})[0])
	recordNextAt  = sender.MetaRedriveOffset - 8
	recordRedrive = sender.MetaRedriveOffset
)

// redriveArgs is what redriveLua's ARGV holds before the IDs.
func (q *Queue) redriveArgs(dest string, k keys, redriveID string, now time.Time) []any {
	return []any{ms(now), redriveID, binary.BigEndian.AppendUint64(nil, uint64(ms(now))),
		recordVersion, recordNextAt, recordRedrive, flag(q.orderOf(dest).ByEntity), k.ent}
}

// redriveLua is what redriveScript and resendScript share: moving a dead
// letter back to the ready list under the redrive ID ARGV[2], its record
// rewritten in place (the next time ARGV[3], the redrive ID, at the
// places ARGV[5] and ARGV[6] say), counted as superseded under the
// redrive that had moved it before. A record that does not decode (too
// short, or of another version than ARGV[4]) is listed as broken, never
// sent.
//
// An entity's held head goes first; another envelope of an entity joins
// its back when the destination is ordered now (requeue).
//
//	KEYS  meta, dead, ready, rdc, rdt, due, ents, oc, ... (the script's own)
//	ARGV  now ms, redrive id, now as 8 bytes (big-endian ms), record
//	      version, next time offset, redrive ID offset, "1" when ordered,
//	      the entity lists' prefix (redriveArgs), then ids
var redriveLua = orderLua + `
O.ep, O.ents, O.oc, O.meta, O.ready, O.due = ARGV[8], KEYS[7], KEYS[8], KEYS[1], KEYS[3], KEYS[6]
local ordered = ARGV[7] == '1'
local rid = ARGV[2]
local version, nextAt, rdOff = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local moved = {}
-- record is whether m may be a record of the version given.
local function record(m)
  return #m > rdOff and string.byte(m, 1) == version
end
-- redriven is record m under this redrive, and the redrive ID it had.
local function redriven(m)
  local n = string.byte(m, rdOff + 1)
  return string.sub(m, 1, nextAt) .. ARGV[3] .. string.sub(m, nextAt + 9, rdOff) ..
    string.char(#rid) .. rid .. string.sub(m, rdOff + 2 + n), string.sub(m, rdOff + 2, rdOff + 1 + n)
end
-- requeue makes id, of record m, due at once: first if it is its
-- entity's (held) head, at the back of its entity if ordered.
local function requeue(id, m)
  local ent = entityOf(m)
  if ent and ent ~= '' and redis.call('LINDEX', O.ep .. ent, 0) == id then
    unheld()
    redis.call('RPUSH', O.ready, id)
  elseif ordered and ent and ent ~= '' then
    join(id, ent, 0, 0)
  else
    redis.call('RPUSH', O.ready, id)
  end
end
local function redriveDead(id, m)
  if record(m) and redis.call('ZREM', KEYS[2], id) == 1 then
    local rec, old = redriven(m)
    if old ~= '' then
      redis.call('HINCRBY', KEYS[4], old .. ':x', -1)
      redis.call('HINCRBY', KEYS[4], old .. ':s', 1)
    end
    redis.call('HSET', KEYS[1], id, rec)
    requeue(id, m)
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
//	KEYS  meta, dead, ready, rdc, rdt, due, ents, oc
//	ARGV  redriveArgs, then ids
//	returns the IDs moved (those still dead)
var redriveScript = redis.NewScript(redriveLua + `
for i = 9, #ARGV do
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
	args := q.redriveArgs(dest, k, redriveID, now)
	for _, id := range ids {
		args = append(args, id)
	}
	moved, err := q.run(ctx, replicas.Redrive, redriveScript, []string{k.meta, k.dead, k.ready, k.rdc, k.rdt, k.due, k.ents, k.oc}, args...).StringSlice()
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
// A held head purged lets its entity's next go.
//
//	KEYS  meta, body, log, dead, hidx, hist, hpay, hpayt, ents, oc, ready, due
//	ARGV  now ms, the entity lists' prefix, ids
//	returns how many went
var purgeScript = redis.NewScript(orderLua + `
O.ep, O.ents, O.oc, O.meta, O.ready, O.due = ARGV[2], KEYS[9], KEYS[10], KEYS[1], KEYS[11], KEYS[12]
local n = 0
for i = 3, #ARGV do
  if redis.call('ZREM', KEYS[4], ARGV[i]) == 1 then
    local ent = headOf(ARGV[i], redis.call('HGET', KEYS[1], ARGV[i]))
    if ent then
      unheld()
      leave(ARGV[i], ent, tonumber(ARGV[1]))
    end
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
	args := make([]any, 0, 2+len(ids))
	args = append(args, ms(q.now()), k.ent)
	for _, id := range ids {
		args = append(args, id)
	}
	n, err := q.run(ctx, replicas.Purge, purgeScript, []string{k.meta, k.body, k.log, k.dead, k.hidx, k.hist, k.hpay, k.hpayt,
		k.ents, k.oc, k.ready, k.due}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redis purge: %w", err)
	}
	return n, nil
}

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
