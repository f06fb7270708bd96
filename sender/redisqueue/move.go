package redisqueue

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/sender"
)

// A Move carries from's history to to, as the embedded queue does: each
// ID's newest entry, at the millisecond it settled, with its kept
// payload, unless to holds a newer entry of that ID. A stream takes
// entries at its end only, and the two destinations' keys are in
// different Cluster slots, so it goes in three steps:
//
//  1. merge: to's entries and from's are written in time order into a
//     new stream in to's slot (histmv), to's with their own entry IDs, a
//     bounded number per script; histmvidx notes the entry ID each of
//     from's got;
//  2. swap: one script copies what to settled meanwhile and renames the
//     new stream over to's;
//  3. apply: a page of from's entries at a time, to's hidx points at them
//     and their payloads move (the page bounded by the payloads' size),
//     then they leave from.
//
// Cut short before the swap, from still holds everything and the next
// Move starts again; cut short after it, the next Move finds to holding
// the entries already applied and carries the rest. Move runs one at a
// time per destination: two would share histmv.

// moveHistoryCopy bounds the entries of to one merge script copies.
const moveHistoryCopy = 1000

// movePayloadBytes bounds the payload bytes one apply step carries.
const movePayloadBytes = 4 << 20

// mergeHistoryScript writes into histmv, in time order, what hist holds after a
// cursor (with their own entry IDs, unless histmv's newest entry is not
// below one: then at its millisecond, hidx following) and the entries of
// another destination given, each at its millisecond, unless hidx holds
// a newer entry of its ID.
//
//	KEYS  hist, histmv, hidx, histmvidx
//	ARGV  cursor (the last entry of hist copied; "0-0" for none), how many
//	      of hist's it may copy (-1: all), "page", "tail" or "swap", then
//	      per entry given: entry ID, id, state, record, log
//	returns {cursor, entries given that are done, 1 when "tail" copied
//	hist to its end or "swap" swapped, else 0}
var mergeHistoryScript = redis.NewScript(`
local cur, budget, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local function split(eid)
  local a, b = string.match(eid, '^(%d+)-(%d+)$')
  return tonumber(a), tonumber(b)
end
local topMs, topSeq = -1, -1
local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
if top then
  topMs, topSeq = split(top[1])
end
local function add(eid, fields)
  local ms, seq = split(eid)
  local nid
  if ms > topMs or (ms == topMs and seq > topSeq) then
    nid = redis.call('XADD', KEYS[2], eid, unpack(fields))
  else
    nid = redis.call('XADD', KEYS[2], string.format('%d-*', math.max(ms, topMs)), unpack(fields))
  end
  topMs, topSeq = split(nid)
  return nid
end
-- copy copies hist's entries after cur up to limit; false when the
-- budget ran out first.
local function copy(limit)
  while true do
    if budget == 0 then
      return false
    end
    local n = 100
    if budget > 0 then
      n = math.min(n, budget)
    end
    local es = redis.call('XRANGE', KEYS[1], '(' .. cur, limit, 'COUNT', n)
    if #es == 0 then
      return true
    end
    for _, e in ipairs(es) do
      local nid = add(e[1], e[2])
      if nid ~= e[1] and redis.call('HGET', KEYS[3], e[2][2]) == e[1] then
        redis.call('HSET', KEYS[3], e[2][2], nid)
      end
      cur = e[1]
      if budget > 0 then
        budget = budget - 1
      end
    end
  end
end
local done = 0
for i = 4, #ARGV, 5 do
  local ms = split(ARGV[i])
  if not copy(string.format('%d', ms)) then
    return {cur, done, 0}
  end
  local held = redis.call('HGET', KEYS[3], ARGV[i+1])
  if not held or split(held) < ms then
    local nid = add(ARGV[i], {'i', ARGV[i+1], 's', ARGV[i+2], 'm', ARGV[i+3], 'l', ARGV[i+4]})
    redis.call('HSET', KEYS[4], ARGV[i+1], nid)
  end
  done = done + 1
end
if mode == 'page' then
  return {cur, done, 0}
end
if not copy('+') then
  return {cur, done, 0}
end
if mode == 'swap' and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('RENAME', KEYS[2], KEYS[1])
end
return {cur, done, 1}
`)

// applyScript points hidx at the entries histmvidx notes, unless hidx
// holds a newer entry of the ID, with their payloads; a payload kept
// for the entry it replaces goes.
//
//	KEYS  hidx, hpay, hpayt, histmvidx
//	ARGV  per ID: id, payload, until ms ("" when none is kept)
var applyScript = redis.NewScript(`
local function ms(eid)
  return tonumber(string.match(eid, '^(%d+)'))
end
for i = 1, #ARGV, 3 do
  local id = ARGV[i]
  local nid = redis.call('HGET', KEYS[4], id)
  local held = nid and redis.call('HGET', KEYS[1], id)
  if nid and (not held or ms(held) < ms(nid)) then
    redis.call('HSET', KEYS[1], id, nid)
    redis.call('HDEL', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    if ARGV[i+2] ~= '' then
      redis.call('HSET', KEYS[2], id, ARGV[i+1])
      redis.call('ZADD', KEYS[3], ARGV[i+2], id)
    end
  end
  if nid then
    redis.call('HDEL', KEYS[4], id)
  end
end
return 0
`)

// dropEntriesScript deletes history entries, and what their IDs hold
// when the entry is their newest.
//
//	KEYS  hist, hidx, hpay, hpayt
//	ARGV  per entry: entry ID, id
var dropEntriesScript = redis.NewScript(`
for i = 1, #ARGV, 2 do
  redis.call('XDEL', KEYS[1], ARGV[i])
  if redis.call('HGET', KEYS[2], ARGV[i+1]) == ARGV[i] then
    redis.call('HDEL', KEYS[2], ARGV[i+1])
    redis.call('HDEL', KEYS[3], ARGV[i+1])
    redis.call('ZREM', KEYS[4], ARGV[i+1])
  end
end
return 0
`)

// histEntry is a history entry as a Move reads it.
type histEntry struct {
	eid, id, state, rec, log string
	newest                   bool // from's hidx points at it
}

// historyPage reads up to movePage of src's history entries after
// after ("" for the first) and up to upTo ("+" for the last), oldest
// first.
func (q *Queue) historyPage(ctx context.Context, src keys, after, upTo string) ([]histEntry, error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	page, err := q.rdb.XRangeN(ctx, src.hist, start, upTo, movePage).Result()
	if err != nil || len(page) == 0 {
		return nil, err
	}
	out := make([]histEntry, len(page))
	ids := make([]string, len(page))
	for i, e := range page {
		h := histEntry{eid: e.ID}
		h.id, _ = e.Values["i"].(string)
		h.state, _ = e.Values["s"].(string)
		h.rec, _ = e.Values["m"].(string)
		h.log, _ = e.Values["l"].(string)
		out[i], ids[i] = h, h.id
	}
	cur, err := q.rdb.HMGet(ctx, src.hidx, ids...).Result()
	if err != nil {
		return nil, err
	}
	for i := range out {
		eid, _ := str(cur[i])
		out[i].newest = eid == out[i].eid
	}
	return out, nil
}

// moveHistory moves src's history to dst (see above).
func (q *Queue) moveHistory(ctx context.Context, src, dst keys) error {
	n, err := q.rdb.XLen(ctx, src.hist).Result()
	if err != nil || n == 0 {
		return err
	}
	if err := q.rdb.Del(ctx, dst.histmv, dst.histmvidx).Err(); err != nil {
		return err
	}
	merge := []string{dst.hist, dst.histmv, dst.hidx, dst.histmvidx}
	cursor := "0-0"
	run := func(mode string, entries []any) (done int, finished bool, err error) {
		args := append([]any{cursor, moveHistoryCopy, mode}, entries...)
		if mode == "swap" {
			args[1] = -1
		}
		v, err := mergeHistoryScript.Run(ctx, q.rdb, merge, args...).Slice()
		if err != nil {
			return 0, false, err
		}
		cursor, _ = str(v[0])
		d, _ := v[1].(int64)
		f, _ := v[2].(int64)
		return int(d), f == 1, nil
	}
	// 1. merge; what from settles from now on (a lease that was live)
	// stays in from, for a later Move.
	merged := ""
	for {
		page, err := q.historyPage(ctx, src, merged, "+")
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		merged = page[len(page)-1].eid
		var entries []any
		for _, h := range page {
			if h.newest {
				entries = append(entries, h.eid, h.id, h.state, h.rec, h.log)
			}
		}
		for len(entries) > 0 {
			done, _, err := run("page", entries)
			if err != nil {
				return err
			}
			entries = entries[5*done:]
		}
	}
	if merged == "" { // trimmed meanwhile: nothing to carry
		return q.rdb.Del(ctx, dst.histmv, dst.histmvidx).Err()
	}
	for {
		_, finished, err := run("tail", nil)
		if err != nil {
			return err
		}
		if finished {
			break
		}
	}
	// 2. swap
	if _, _, err := run("swap", nil); err != nil {
		return err
	}
	// 3. apply
	for after := ""; ; {
		page, err := q.historyPage(ctx, src, after, merged)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return q.rdb.Del(ctx, dst.histmvidx).Err()
		}
		after = page[len(page)-1].eid
		for len(page) > 0 {
			n, size := 0, 0
			for n < len(page) && (n == 0 || size < movePayloadBytes) {
				if m, err := sender.UnmarshalMeta("", page[n].id, []byte(page[n].rec)); err == nil && page[n].state == "d" {
					size += m.Size
				}
				n++
			}
			if err := q.applyHistory(ctx, src, dst, page[:n]); err != nil {
				return err
			}
			page = page[n:]
		}
	}
}

// applyHistory carries the entries of page that are their ID's newest to
// dst (step 3), then deletes page's entries in src.
func (q *Queue) applyHistory(ctx context.Context, src, dst keys, page []histEntry) error {
	var ids []string
	for _, h := range page {
		if h.newest {
			ids = append(ids, h.id)
		}
	}
	if len(ids) > 0 {
		payloads, err := q.rdb.HMGet(ctx, src.hpay, ids...).Result()
		if err != nil {
			return err
		}
		until, err := q.rdb.ZMScore(ctx, src.hpayt, ids...).Result()
		if err != nil {
			return err
		}
		args := make([]any, 0, 3*len(ids))
		for i, id := range ids {
			p, ok := str(payloads[i])
			at := ""
			if ok && until[i] > 0 {
				at = strconv.FormatInt(int64(until[i]), 10)
			}
			args = append(args, id, p, at)
		}
		if err := applyScript.Run(ctx, q.rdb, []string{dst.hidx, dst.hpay, dst.hpayt, dst.histmvidx}, args...).Err(); err != nil {
			return err
		}
	}
	args := make([]any, 0, 2*len(page))
	for _, h := range page {
		args = append(args, h.eid, h.id)
	}
	return dropEntriesScript.Run(ctx, q.rdb, []string{src.hist, src.hidx, src.hpay, src.hpayt}, args...).Err()
}
