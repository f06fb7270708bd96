package redisqueue

// The delivery history's lookups and its trim: what settled, in the
// hist, hidx, hpay and hpayt keys (the schema is in keys.go).

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/sender"
)

// now is the clock a kept payload's time is judged by when a call brings
// none (Get).
func (q *Queue) now() time.Time {
	if q.history.Now != nil {
		return q.history.Now()
	}
	return time.Now()
}

// historyEntry decodes a history entry as the scripts answer it: {entry
// ID, id, state (d or x), record}.
func historyEntry(dest string, v []any) *sender.Meta {
	eid, _ := str(v[0])
	id, _ := str(v[1])
	state, _ := str(v[2])
	raw, _ := str(v[3])
	m, err := sender.UnmarshalMeta(dest, id, []byte(raw))
	if err != nil {
		m = sender.BrokenMeta(dest, id, err)
	}
	m.State, m.SettledAt, m.HistoryID = sender.StateDelivered, entryTime(eid), eid
	if state == "x" {
		m.State, m.DeadAt = sender.StateDead, m.SettledAt
	}
	return m
}

// lookupScript reads the newest history entry of each ID, by hidx.
//
//	KEYS  hist, hidx
//	ARGV  ids
//	returns per ID found: entry ID, id, state, record
var lookupScript = redis.NewScript(`
local out = {}
for _, id in ipairs(ARGV) do
  local eid = redis.call('HGET', KEYS[2], id)
  local e = eid and redis.call('XRANGE', KEYS[1], eid, eid)[1]
  if e then
    table.insert(out, eid)
    table.insert(out, id)
    table.insert(out, e[2][4])
    table.insert(out, e[2][6])
  end
end
return out
`)

// lookupBatch bounds the IDs one lookup script reads.
const lookupBatch = 500

// lookup is History for a filter that names its IDs: each is read by
// hidx, a batch a round trip, whatever the history's length.
func (q *Queue) lookup(ctx context.Context, k keys, dest string, f sender.HistoryFilter, ids []string, cursor string, limit int) ([]*sender.Meta, string, error) {
	var found []*sender.Meta
	for start := 0; start < len(ids); start += lookupBatch {
		chunk := ids[start:min(start+lookupBatch, len(ids))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		v, err := lookupScript.Run(ctx, q.rdb, []string{k.hist, k.hidx}, args...).Slice()
		if err != nil {
			return nil, "", fmt.Errorf("redis history: %w", err)
		}
		for i := 0; i+3 < len(v); i += 4 {
			found = append(found, historyEntry(dest, v[i:i+4]))
		}
	}
	page, next := sender.LookupPage(found, f, cursor, limit)
	return page, next, nil
}

// trimHistoryLua defines trimHistory(hist, hidx, hpay, hpayt, now, keep):
// it forgets up to 100 entries settled more than keep ms before now
// (and their ID's payload, when the entry is the ID's newest), then up
// to 100 payloads whose time is before now, and answers whether either
// batch was full (more may be due).
const trimHistoryLua = `
local function trimHistory(hist, hidx, hpay, hpayt, now, keep)
  local full = false
  local hcut = now - keep
  if hcut > 0 then
    local es = redis.call('XRANGE', hist, '-', string.format('%d', hcut - 1), 'COUNT', 100)
    for _, e in ipairs(es) do
      local id = e[2][2]
      if redis.call('HGET', hidx, id) == e[1] then
        redis.call('HDEL', hidx, id)
        redis.call('HDEL', hpay, id)
        redis.call('ZREM', hpayt, id)
      end
      redis.call('XDEL', hist, e[1])
    end
    full = #es == 100
  end
  local old = redis.call('ZRANGEBYSCORE', hpayt, '-inf', '(' .. now, 'LIMIT', 0, 100)
  if #old > 0 then
    redis.call('HDEL', hpay, unpack(old))
    redis.call('ZREM', hpayt, unpack(old))
  end
  return full or #old == 100
end
`

// trimScript trims the history when something is due, and says when the
// next is: it writes nothing when nothing is due.
//
//	KEYS  hist, hidx, hpay, hpayt
//	ARGV  now ms, keep ms
//	returns the next due ms: now when more are due, 0 when nothing will be
var trimScript = redis.NewScript(trimHistoryLua + `
local now, keep = tonumber(ARGV[1]), tonumber(ARGV[2])
-- when is the time the oldest entry, or the soonest payload, goes
local function when()
  local nxt = 0
  local e = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
  if e then
    nxt = tonumber(string.match(e[1], '^(%d+)')) + keep + 1
  end
  local p = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  if #p > 0 and (nxt == 0 or tonumber(p[2]) + 1 < nxt) then
    nxt = tonumber(p[2]) + 1
  end
  return nxt
end
local nxt = when()
if nxt == 0 or nxt > now then
  return nxt
end
if trimHistory(KEYS[1], KEYS[2], KEYS[3], KEYS[4], now, keep) then
  return now
end
return when()
`)

// TrimHistory implements sender.Queue: one script, which writes only
// when something is due.
func (q *Queue) TrimHistory(ctx context.Context, dest string, now time.Time) (time.Time, error) {
	k := keysOf(q.prefix, dest)
	keep := q.history.Keep
	if keep <= 0 {
		keep = q.retention
	}
	n, err := trimScript.Run(ctx, q.rdb, []string{k.hist, k.hidx, k.hpay, k.hpayt}, ms(now), keep.Milliseconds()).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis trim history: %w", err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(n), nil
}
