package redisqueue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/sender"
)

// Renames: Move carries a destination's envelopes, redrive counts and
// history to another name; Drop forgets an orphan.

// movePage is how many envelopes one step of a Move reads.
const movePage = 200

// movePageScript reads a page of one index of a destination, from an
// offset (the envelopes kept there by earlier pages), with each
// envelope's parts.
//
//	KEYS  index, meta, body, log
//	ARGV  "list", "zset" or "leases", offset, n, now ms: of leases, only
//	      those ended by now
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
  local r = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[4], 'WITHSCORES', 'LIMIT', off, n)
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
// A queued one joins its entity when to is ordered. One that came from an
// ordered entity of from ("1") is written only while none of its entity
// before it stayed: else it stays too (-2), behind it.
//
//	KEYS  meta, body, log, ready, dead, hidx, hist, due, ents, oc
//	ARGV  "1" when to is ordered, the entity lists' prefix, then per
//	      envelope: id, "x" (dead) or "q", dead-at ms, record, payload,
//	      log, "1" when it was in an entity of from
//	returns per envelope: 1 written, 0 held already with the same
//	payload, -1 held with another, -2 behind one that stays
var moveInScript = redis.NewScript(orderLua + `
O.ep, O.ents, O.oc, O.meta, O.ready, O.due = ARGV[2], KEYS[9], KEYS[10], KEYS[1], KEYS[4], KEYS[8]
local out = {}
local stay = {}
for i = 3, #ARGV, 7 do
  local id, state, score, rec, body, log = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4], ARGV[i+5]
  local from = ARGV[i+6] == '1' and entityOf(rec)
  local fp = string.sub(rec, 2, 9)
  local cur = redis.call('HGET', KEYS[1], id)
  local done
  local eid = (not cur) and redis.call('HGET', KEYS[6], id)
  local e = eid and redis.call('XRANGE', KEYS[7], eid, eid)[1]
  if e and e[2][4] == 'd' then
    done = string.sub(e[2][6], 2, 9)
  end
  if from and stay[from] then
    table.insert(out, -2)
  elseif cur or done then
    local same = string.sub(cur or done, 2, 9) == fp
    if not same and from then
      stay[from] = true
    end
    table.insert(out, same and 0 or -1)
  else
    redis.call('HSET', KEYS[1], id, rec)
    redis.call('HSET', KEYS[2], id, body)
    if log ~= '' then
      redis.call('HSET', KEYS[3], id, log)
    end
    local ent = ARGV[1] == '1' and state ~= 'x' and entityOf(rec)
    if state == 'x' then
      redis.call('ZADD', KEYS[5], score, id)
    elseif ent and ent ~= '' then
      join(id, ent, 0, 0)
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
	// One clock for the whole Move, Redis's (read once) or the caller's:
	// a lease judged live by the first step is live for the last.
	clock := strconv.FormatInt(ms(now), 10)
	if !q.callerClock {
		t, err := q.rdb.Time(ctx).Result()
		if err != nil {
			return 0, 0, fmt.Errorf("redis move: %w", err)
		}
		clock = strconv.FormatInt(ms(t), 10)
	}
	// Envelopes that wait behind their entity's head go to the ready
	// list, in order, behind it, to be moved with the rest; those behind
	// a live lease stay, and count as kept. When a head (or any of them)
	// stays in from, because to holds its ID with another payload, those
	// behind it stay too (stay), or they would overtake it.
	behindLive, flattened, err := q.flatten(ctx, src, clock)
	if err != nil {
		return 0, 0, fmt.Errorf("redis move: %w", err)
	}
	stay := map[string]bool{}
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
			var ids, ents []string
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
				if flattened[m.Entity] && stay[m.Entity] {
					kept++
					offset++
					continue
				}
				body, _ := str(v[3*n+i])
				log, _ := str(v[4*n+i])
				score, _ := str(v[n+i])
				in = append(in, id, ix.state, score, sender.MarshalMeta(m), body, log, flag(flattened[m.Entity]))
				ids = append(ids, id)
				ents = append(ents, m.Entity)
			}
			var out []any
			if len(in) > 0 {
				in = append([]any{flag(q.orderOf(to).ByEntity), dst.ent}, in...)
				res, err := moveInScript.Run(ctx, q.rdb, []string{dst.meta, dst.body, dst.log, dst.ready, dst.dead, dst.hidx, dst.hist,
					dst.due, dst.ents, dst.oc}, in...).Int64Slice()
				if err != nil {
					return moved, kept, fmt.Errorf("redis move: writing %s: %w", to, err)
				}
				for j, r := range res {
					id := in[2+7*j].(string)
					if r < 0 {
						stay[ents[j]] = flattened[ents[j]]
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
	return moved, kept + int(live) + behindLive, nil
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
	if err := q.dropEntities(ctx, k); err != nil {
		return 0, fmt.Errorf("redis drop: %w", err)
	}
	// One DEL of keys that share a hash tag: one slot.
	if err := q.rdb.Del(ctx, k.meta, k.body, k.log, k.ready, k.due, k.leased, k.dead,
		k.paused, k.corrupt, k.rdc, k.rdt, k.hist, k.hidx, k.hpay, k.hpayt, k.histmv, k.histmvidx, k.ents, k.oc).Err(); err != nil {
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
					size += m.Size + m.ReceivedSize
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
