package redisqueue

// The delivery history: its walk, lookups, resend and trim, over what
// settled in the hist, hidx, hpay and hpayt keys (the schema is in
// keys.go).

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/replicas"
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

// TrimHistory implements sender.Queue: the history's script, which
// writes only when something is due, then the dead letters' (trimDead).
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
	var next time.Time
	if n != 0 {
		next = time.UnixMilli(n)
	}
	dead, err := q.trimDead(ctx, dest, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("redis trim dead letters: %w", err)
	}
	if !dead.IsZero() && (next.IsZero() || dead.Before(next)) {
		next = dead
	}
	return next, nil
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
//	KEYS  meta, dead, ready, rdc, rdt, due, ents, oc, body, log, hidx, hist,
//	      hpay, hpayt
//	ARGV  redriveArgs, then ids
//	returns the IDs moved
var resendScript = redis.NewScript(redriveLua + `
for i = 9, #ARGV do
  local id = ARGV[i]
  local m = redis.call('HGET', KEYS[1], id)
  if m then
    redriveDead(id, m)
  else
    local eid = redis.call('HGET', KEYS[11], id)
    local e = eid and redis.call('XRANGE', KEYS[12], eid, eid)[1]
    local untilMs = redis.call('ZSCORE', KEYS[14], id)
    local body = untilMs and tonumber(untilMs) >= tonumber(ARGV[1]) and redis.call('HGET', KEYS[13], id)
    local h = e and e[2]
    if h and h[4] == 'd' and body and record(h[6]) then
      local rec = redriven(h[6])
      redis.call('HSET', KEYS[1], id, rec)
      redis.call('HSET', KEYS[9], id, body)
      if h[8] ~= '' then
        redis.call('HSET', KEYS[10], id, h[8])
      end
      redis.call('HDEL', KEYS[13], id)
      redis.call('ZREM', KEYS[14], id)
      requeue(id, rec)
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
	args := q.redriveArgs(dest, k, redriveID, now)
	for _, id := range ids {
		args = append(args, id)
	}
	moved, err := q.run(ctx, replicas.Resend, resendScript, []string{k.meta, k.dead, k.ready, k.rdc, k.rdt, k.due, k.ents, k.oc,
		k.body, k.log, k.hidx, k.hist, k.hpay, k.hpayt}, args...).StringSlice()
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
