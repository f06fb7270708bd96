// Package redisstore is the Redis dedupe.Store: one go-redis
// UniversalClient (single node, Sentinel or Cluster), a dedupe entry one
// STRING, a claim one SET NX GET, every other multi-step change one Lua
// script, times passed from the caller's clock. The claim,
// record, release, get, acquire and finish of concurrent requests share
// pipelines (see internal/pipeline): under load a round trip serves many
// requests.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/pipeline"
	"github.com/hookgate/hookgate/internal/replicas"
)

// Store is a dedupe.Store on Redis.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	batch  *pipeline.Batcher
	repl   *replicas.Waiter // nil: writes wait for no replica
}

// New returns a Store whose keys start with prefix.
//
// On a single node (or through Sentinel) concurrent calls share pipelines
// (package pipeline). On a Cluster each call goes on its own: a pipeline
// spanning several masters waits for the slowest, so one stalled master
// would hold every request, where alone it holds only its own keys.
func New(rdb redis.UniversalClient, prefix string) *Store {
	s := &Store{rdb: rdb, prefix: prefix}
	if _, cluster := rdb.(*redis.ClusterClient); !cluster {
		s.batch = pipeline.New(rdb, 0)
	}
	return s
}

// Stats counts the pipelines (round trips) and commands the Store's
// batcher has sent: none on a Cluster, where it has no batcher.
func (s *Store) Stats() pipeline.Stats {
	if s.batch == nil {
		return pipeline.Stats{}
	}
	return s.batch.Stats()
}

// WaitForReplicas makes the Store's writes wait for w's replicas
// (min_replicas): a claim (and an entity's acquire) that they did not
// acknowledge in time fails, a record, release or watermark is counted.
// Batched writes share one WAIT per pipeline. Call it before first use.
func (s *Store) WaitForReplicas(w *replicas.Waiter) {
	s.repl = w
	if s.batch != nil {
		s.batch.SetWait(w.WaitCmd)
	}
}

// do sends cmd, in a shared pipeline when the Store has a batcher.
func (s *Store) do(ctx context.Context, cmd redis.Cmder) error {
	if s.batch == nil {
		return s.rdb.Process(ctx, cmd)
	}
	return s.batch.Do(ctx, cmd)
}

// write sends cmd, a write of key, as do does; with WaitForReplicas it
// is followed by WAIT, and acked is how many replicas acknowledged it.
// The caller judges acked (s.repl.Check) when cmd's answer says it wrote:
// a claim that found a record in its way wrote nothing, and its answer
// (the record, or 409) does not depend on the replicas.
func (s *Store) write(ctx context.Context, key string, cmd redis.Cmder) (acked int, err error) {
	switch {
	case s.repl == nil:
		return 0, s.do(ctx, cmd)
	case s.batch == nil:
		return s.repl.Send(ctx, key, cmd)
	}
	return s.batch.DoWrite(ctx, cmd)
}

// eval runs a script in the next shared pipeline, as EVALSHA. args are
// the EVALSHA's: "evalsha", the script's hash, 1, the key, then the
// script's ARGV. A Redis that does not hold the script (restarted, or
// SCRIPT FLUSH) answers NOSCRIPT without running it; the script is then
// loaded and run on its own, which loads it for the next pipelines.
// With WaitForReplicas, acked is how many replicas acknowledged it, for
// the caller to judge as write's caller does.
func (s *Store) eval(ctx context.Context, script *redis.Script, args ...any) (cmd *redis.Cmd, acked int) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	key, _ := args[3].(string)
	if s.batch == nil && s.repl != nil {
		return s.repl.Eval(ctx, script, []string{key}, args[4:]...)
	}
	cmd = redis.NewCmd(ctx, args...)
	var err error
	if s.batch == nil {
		err = s.rdb.Process(ctx, cmd)
	} else {
		acked, err = s.batch.DoWrite(ctx, cmd)
	}
	switch {
	case err == nil:
		return cmd, acked
	case ctx.Err() != nil && err == ctx.Err():
		// The pipeline may still answer cmd: hand back a command of our own.
		failed := redis.NewCmd(ctx)
		failed.SetErr(err)
		return failed, 0
	case redis.HasErrorPrefix(err, "NOSCRIPT") && s.repl != nil:
		// Loaded first, so that the run waits for the replicas once.
		if err := script.Load(ctx, s.rdb).Err(); err != nil {
			failed := redis.NewCmd(ctx)
			failed.SetErr(err)
			return failed, 0
		}
		return s.repl.Eval(ctx, script, []string{key}, args[4:]...)
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		return script.Run(ctx, s.rdb, []string{key}, args[4:]...), 0
	}
	return cmd, acked
}

// Timeout bounds how long a call waits for Redis when its context has no
// earlier deadline: a Redis that sleeps or hangs answers the request with
// an error (503) after it, never a request held for as long as Redis is
// away. A shared pipeline retries as the client is configured; this keeps
// each call to the bound the gateway's client gives a lone command (a 2 s
// read timeout, one retry).
const Timeout = 4 * time.Second

// bounded is ctx with a deadline no later than Timeout from now.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= Timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, Timeout)
}

// gcSlack is how long after its logical expiry Redis drops an entry.
const gcSlack = time.Minute

func ms(t time.Time) int64 { return t.UnixMilli() }

// Claim implements dedupe.Store. It is one SET NX GET: Redis writes the
// claim when the key holds nothing, and otherwise answers with the entry
// in the way without changing it, which Claim reads here: a claim of the
// same token (a retry whose first answer was lost), another fingerprint,
// a record, a live lease. Only an entry whose time is up (an expired
// lease to take over, an expired entry to replace) goes to
// takeOverScript, which decides again atomically.
func (s *Store) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	res, err := s.claim(ctx, key, c)
	if errors.Is(err, replicas.ErrShortfall) {
		// Refused, but the master may hold the claim: free it, so that
		// the provider's retry is not answered in_flight until its lease
		// ends. The token holds it only if this call wrote it.
		_ = s.Release(context.WithoutCancel(ctx), key, c.Token)
	}
	return res, err
}

func (s *Store) claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	if len(c.Token) > maxToken {
		return dedupe.ClaimResult{}, errors.New("redis claim: token over 255 bytes")
	}
	k := entryKey(s.prefix, key)
	now := ms(c.Now)
	val := appendClaim(make([]byte, 0, claimSize(c.Token)), &c.Fingerprint, c.Token, now+c.Lease.Milliseconds(), now+c.Retention.Milliseconds())
	gc := (c.Retention + gcSlack).Milliseconds()
	v, err := s.setNX(ctx, k, val, gc)
	switch {
	case err == redis.Nil:
		return dedupe.ClaimResult{Status: dedupe.Claimed}, nil
	case err != nil:
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim: %w", err)
	}
	e, ok := parseEntry(v)
	if !ok {
		return dedupe.ClaimResult{}, errors.New("redis claim: malformed entry")
	}
	switch {
	case e.expires <= now:
		return s.takeOver(ctx, k, val, now, gc)
	case !e.recorded && e.token == c.Token:
		if e.tookOver {
			return dedupe.ClaimResult{Status: dedupe.TookOver}, nil
		}
		return dedupe.ClaimResult{Status: dedupe.Claimed}, nil
	case e.fp != c.Fingerprint:
		return dedupe.ClaimResult{Status: dedupe.Mismatch}, nil
	case e.recorded:
		rec, err := dedupe.UnmarshalRecord([]byte(e.rec))
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim: decoding record: %w", err)
		}
		return dedupe.ClaimResult{Status: dedupe.Recorded, Record: rec, Expires: time.UnixMilli(e.expires)}, nil
	case e.leaseUntil <= now:
		return s.takeOver(ctx, k, val, now, gc)
	}
	return dedupe.ClaimResult{Status: dedupe.InFlight, LeaseUntil: time.UnixMilli(e.leaseUntil)}, nil
}

// setNX sets k to val for gc ms unless it exists, and returns what it
// held: redis.Nil when it held nothing (and now holds val).
func (s *Store) setNX(ctx context.Context, k string, val []byte, gc int64) (string, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	cmd := redis.NewStringCmd(ctx, "set", k, val, "px", gc, "nx", "get")
	acked, err := s.write(ctx, k, cmd)
	if err != nil && err != redis.Nil {
		return "", err // the batcher's command may still be answered: not read
	}
	v, err := cmd.Result()
	if err == redis.Nil { // it claimed
		if short := s.repl.Check(replicas.Claim, acked); short != nil {
			return "", short
		}
	}
	return v, err
}

// takeOverScript claims a key whose entry is in the way of SET NX but
// whose time is up; it decides as Claim does, atomically.
//
//	KEYS[1] entry
//	ARGV    the claim's entry, now ms, gc ttl ms
//	returns {1} claimed, {2} took over an expired lease, {3, lease-until ms}
//	        in flight, {4, record, expiry ms} recorded, {5} another fingerprint
var takeOverScript = redis.NewScript(`
local claim = ARGV[1]
local now = tonumber(ARGV[2])
local n = string.byte(claim, 35)
local tok, myfp = string.sub(claim, 36, 35 + n), string.sub(claim, 3, 34)
local s, to, fp, etok, lu, exp, rec
local v = redis.call('GET', KEYS[1])
if v then
  local m = string.byte(v, 35)
  s, to, fp, etok = string.sub(v, 1, 1), string.sub(v, 2, 2), string.sub(v, 3, 34), string.sub(v, 36, 35 + m)
  local i = string.find(v, ':', 36 + m, true)
  local a = tonumber(string.sub(v, 36 + m, i - 1))
  if s == 'c' then
    lu, exp = a, tonumber(string.sub(v, i + 1))
  else
    exp, rec = a, string.sub(v, i + 1)
  end
end
if s and exp <= now then
  s = false
end
if s == 'c' and etok == tok then
  if to == '1' then
    return {2}
  end
  return {1}
end
if not s then
  redis.call('SET', KEYS[1], claim, 'PX', ARGV[3])
  return {1}
end
if fp ~= myfp then
  return {5}
end
if s == 'r' then
  return {4, rec, exp}
end
if lu <= now then
  redis.call('SET', KEYS[1], 'c1' .. string.sub(claim, 3), 'PX', ARGV[3])
  return {2}
end
return {3, lu}
`)

var (
	takeOverSHA any = takeOverScript.Hash()
	recordSHA   any = recordScript.Hash()
)

// takeOver runs takeOverScript.
func (s *Store) takeOver(ctx context.Context, k string, val []byte, now, gc int64) (dedupe.ClaimResult, error) {
	cmd, acked := s.eval(ctx, takeOverScript, "evalsha", takeOverSHA, 1, k, val, now, gc)
	v, err := cmd.Slice()
	if err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim: %w", err)
	}
	code, _ := v[0].(int64)
	res := dedupe.ClaimResult{Status: dedupe.ClaimStatus(code)}
	if res.Status == dedupe.Claimed || res.Status == dedupe.TookOver {
		if short := s.repl.Check(replicas.Claim, acked); short != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim: %w", short)
		}
	}
	switch {
	case res.Status == dedupe.Claimed || res.Status == dedupe.TookOver || res.Status == dedupe.Mismatch:
	case res.Status == dedupe.InFlight && len(v) == 2:
		lu, ok := v[1].(int64)
		if !ok {
			return dedupe.ClaimResult{}, errors.New("redis claim: bad lease")
		}
		res.LeaseUntil = time.UnixMilli(lu)
	case res.Status == dedupe.Recorded && len(v) == 3:
		exp, ok := v[2].(int64)
		if !ok {
			return dedupe.ClaimResult{}, errors.New("redis claim: bad expiry")
		}
		rec, err := dedupe.UnmarshalRecord([]byte(str(v[1])))
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim: decoding record: %w", err)
		}
		res.Record, res.Expires = rec, time.UnixMilli(exp)
	default:
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim: unexpected answer %v", v)
	}
	return res, nil
}

// recordScript records the response of the claim held by a token: the
// token check is its only work; the entry keeps its fingerprint and token.
//
//	KEYS[1] entry
//	ARGV    token, expiry ms, record, gc ttl ms
//	returns 1 recorded (also when this token already recorded it), 0 the
//	        token does not hold the claim
var recordScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or #v < 35 then
  return 0
end
local n = string.byte(v, 35)
if string.sub(v, 36, 35 + n) ~= ARGV[1] then
  return 0
end
if string.byte(v, 1) == 114 then
  return 1
end
redis.call('SET', KEYS[1], 'r' .. string.sub(v, 2, 35 + n) .. ARGV[2] .. ':' .. ARGV[3], 'PX', ARGV[4])
return 1
`)

// Record implements dedupe.Store.
func (s *Store) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	cmd, acked := s.eval(ctx, recordScript, "evalsha", recordSHA, 1, entryKey(s.prefix, key),
		token, ms(now.Add(retention)), dedupe.MarshalRecord(rec), (retention + gcSlack).Milliseconds())
	n, err := cmd.Int()
	switch {
	case err != nil:
		return fmt.Errorf("redis record: %w", err)
	case n == 0:
		return dedupe.ErrClaimLost
	}
	return s.repl.Check(replicas.Record, acked) // counted, never refused
}

// releaseScript deletes the claim held by a token.
//
//	KEYS[1] entry
//	ARGV    token
//	returns 1 released, 0 the token does not hold the claim
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and #v >= 35 and string.byte(v, 1) == 99 and string.sub(v, 36, 35 + string.byte(v, 35)) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

var releaseSHA any = releaseScript.Hash()

// Release implements dedupe.Store.
func (s *Store) Release(ctx context.Context, key, token string) error {
	cmd, acked := s.eval(ctx, releaseScript, "evalsha", releaseSHA, 1, entryKey(s.prefix, key), token)
	n, err := cmd.Int()
	if err != nil {
		return fmt.Errorf("redis release: %w", err)
	}
	if n == 1 {
		return s.repl.Check(replicas.Release, acked) // counted, never refused
	}
	return nil
}

// Get implements dedupe.Store.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (dedupe.Entry, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	k := entryKey(s.prefix, key)
	cmd := redis.NewStringCmd(ctx, "get", k)
	err := s.do(ctx, cmd)
	if err != nil && err != redis.Nil {
		return dedupe.Entry{}, fmt.Errorf("redis get: %w", err)
	}
	v, err := cmd.Result()
	if err == redis.Nil {
		return dedupe.Entry{}, nil
	}
	if err != nil {
		return dedupe.Entry{}, fmt.Errorf("redis get: %w", err)
	}
	e, ok := parseEntry(v)
	if !ok {
		return dedupe.Entry{}, errors.New("redis get: malformed entry")
	}
	if e.expires <= ms(now) {
		return dedupe.Entry{}, nil
	}
	got := dedupe.Entry{Fingerprint: e.fp, Expires: time.UnixMilli(e.expires)}
	if !e.recorded {
		got.State, got.LeaseUntil = dedupe.StateClaimed, time.UnixMilli(e.leaseUntil)
		return got, nil
	}
	rec, err := dedupe.UnmarshalRecord([]byte(e.rec))
	if err != nil {
		return dedupe.Entry{}, fmt.Errorf("redis get: decoding record: %w", err)
	}
	got.State, got.Record = dedupe.StateRecorded, rec
	return got, nil
}

// Forget implements dedupe.Store.
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	n, err := s.rdb.Del(ctx, entryKey(s.prefix, key)).Result()
	if err != nil {
		return false, fmt.Errorf("redis forget: %w", err)
	}
	return n == 1, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

var _ dedupe.Store = (*Store)(nil)
