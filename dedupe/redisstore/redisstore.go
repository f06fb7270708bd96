// Package redisstore is the Redis dedupe.Store: one go-redis
// UniversalClient (single node, Sentinel or Cluster), every multi-step
// change one Lua script, times passed from the caller's clock. The claim,
// record, release, get, acquire and finish of concurrent requests share
// pipelines (see internal/pipeline): under load a round trip serves many
// requests.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/pipeline"
)

// Store is a dedupe.Store on Redis.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	batch  *pipeline.Batcher
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

// do sends cmd, in a shared pipeline when the Store has a batcher.
func (s *Store) do(ctx context.Context, cmd redis.Cmder) error {
	if s.batch == nil {
		return s.rdb.Process(ctx, cmd)
	}
	return s.batch.Do(ctx, cmd)
}

// eval runs script in the next shared pipeline, as EVALSHA. A Redis that
// does not hold the script (restarted, or SCRIPT FLUSH) answers NOSCRIPT
// without running it; the script is then run on its own, EVALSHA then
// EVAL, which loads it for the next pipelines.
func (s *Store) eval(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if s.batch == nil {
		return script.Run(ctx, s.rdb, keys, args...)
	}
	cmd := evalSha(ctx, script, keys, args)
	err := s.batch.Do(ctx, cmd)
	switch {
	case err == nil:
		return cmd
	case ctx.Err() != nil && err == ctx.Err():
		// The pipeline may still answer cmd: hand back a command of our own.
		failed := redis.NewCmd(ctx)
		failed.SetErr(err)
		return failed
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		return script.Run(ctx, s.rdb, keys, args...)
	}
	return cmd
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

// evalSha builds, without sending it, the EVALSHA of script.
func evalSha(ctx context.Context, script *redis.Script, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "evalsha", script.Hash(), len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return redis.NewCmd(ctx, append(a, args...)...)
}

// gcSlack is how long after its logical expiry Redis drops an entry.
const gcSlack = time.Minute

func ms(t time.Time) int64 { return t.UnixMilli() }

// claimScript claims a key.
//
//	KEYS[1] entry
//	ARGV    fp, token, now ms, lease ms, retention ms, gc ttl ms
//	returns {1} claimed, {2} took over an expired lease, {3, lease-until ms}
//	        in flight, {4, record, expiry ms} recorded, {5} another fingerprint
//
// A retry of the same call (same token; go-redis resends a script whose
// reply was lost) answers as the first call did: claimed, or took over.
var claimScript = redis.NewScript(`
local e = redis.call('HMGET', KEYS[1], 's', 'fp', 'lu', 'exp', 'rec', 'tok', 'to')
local now = tonumber(ARGV[3])
local leaseUntil = now + tonumber(ARGV[4])
local exp = now + tonumber(ARGV[5])
if e[1] and tonumber(e[4]) <= now then
  redis.call('DEL', KEYS[1])
  e[1] = false
end
if e[1] == 'c' and e[6] == ARGV[2] then
  if e[7] == '1' then
    return {2}
  end
  return {1}
end
if not e[1] then
  redis.call('HSET', KEYS[1], 's', 'c', 'fp', ARGV[1], 'tok', ARGV[2], 'lu', leaseUntil, 'exp', exp, 'to', '0')
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  return {1}
end
if e[2] ~= ARGV[1] then
  return {5}
end
if e[1] == 'r' then
  return {4, e[5], e[4]}
end
if tonumber(e[3]) <= now then
  redis.call('HSET', KEYS[1], 'tok', ARGV[2], 'lu', leaseUntil, 'exp', exp, 'to', '1')
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  return {2}
end
return {3, e[3]}
`)

// Claim implements dedupe.Store.
func (s *Store) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	gc := c.Retention + gcSlack
	v, err := s.eval(ctx, claimScript, []string{entryKey(s.prefix, key)},
		c.Fingerprint.String(), c.Token, ms(c.Now), c.Lease.Milliseconds(), c.Retention.Milliseconds(), gc.Milliseconds()).Slice()
	if err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim: %w", err)
	}
	code, _ := v[0].(int64)
	res := dedupe.ClaimResult{Status: dedupe.ClaimStatus(code)}
	switch res.Status {
	case dedupe.Claimed, dedupe.TookOver, dedupe.Mismatch:
	case dedupe.InFlight:
		lu, err := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim: bad lease %v", v[1])
		}
		res.LeaseUntil = time.UnixMilli(lu)
	case dedupe.Recorded:
		rec, err := dedupe.UnmarshalRecord([]byte(str(v[1])))
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim: decoding record: %w", err)
		}
		exp, err := strconv.ParseInt(str(v[2]), 10, 64)
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim: bad expiry %v", v[2])
		}
		res.Record, res.Expires = rec, time.UnixMilli(exp)
	default:
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim: unexpected answer %v", v)
	}
	return res, nil
}

// recordScript records the response of the claim held by a token.
//
//	KEYS[1] entry
//	ARGV    token, record, expiry ms, gc ttl ms
//	returns 1 recorded (also when this token already recorded it), 0 the
//	        token does not hold the claim
var recordScript = redis.NewScript(`
local e = redis.call('HMGET', KEYS[1], 's', 'tok')
if e[2] ~= ARGV[1] then
  return 0
end
if e[1] == 'r' then
  return 1
end
redis.call('HSET', KEYS[1], 's', 'r', 'rec', ARGV[2], 'exp', ARGV[3], 'lu', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// Record implements dedupe.Store.
func (s *Store) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	b := dedupe.MarshalRecord(rec)
	n, err := s.eval(ctx, recordScript, []string{entryKey(s.prefix, key)},
		token, b, ms(now.Add(retention)), (retention + gcSlack).Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("redis record: %w", err)
	}
	if n == 0 {
		return dedupe.ErrClaimLost
	}
	return nil
}

// releaseScript deletes the claim held by a token.
//
//	KEYS[1] entry
//	ARGV    token
//	returns 1 released, 0 the token does not hold the claim
var releaseScript = redis.NewScript(`
local e = redis.call('HMGET', KEYS[1], 's', 'tok')
if e[1] == 'c' and e[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// Release implements dedupe.Store.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := s.eval(ctx, releaseScript, []string{entryKey(s.prefix, key)}, token).Err(); err != nil {
		return fmt.Errorf("redis release: %w", err)
	}
	return nil
}

// Get implements dedupe.Store.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (dedupe.Entry, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	cmd := redis.NewSliceCmd(ctx, "hmget", entryKey(s.prefix, key), "s", "fp", "lu", "exp", "rec")
	if err := s.do(ctx, cmd); err != nil {
		return dedupe.Entry{}, fmt.Errorf("redis get: %w", err)
	}
	v, err := cmd.Result()
	if err != nil {
		return dedupe.Entry{}, fmt.Errorf("redis get: %w", err)
	}
	state, _ := v[0].(string)
	exp, _ := strconv.ParseInt(str(v[3]), 10, 64)
	if state == "" || exp <= ms(now) {
		return dedupe.Entry{}, nil
	}
	fp, ok := dedupe.ParseFingerprint(str(v[1]))
	if !ok {
		return dedupe.Entry{}, errors.New("redis get: bad fingerprint")
	}
	e := dedupe.Entry{Fingerprint: fp, Expires: time.UnixMilli(exp)}
	switch state {
	case "c":
		lu, _ := strconv.ParseInt(str(v[2]), 10, 64)
		e.State, e.LeaseUntil = dedupe.StateClaimed, time.UnixMilli(lu)
	case "r":
		rec, err := dedupe.UnmarshalRecord([]byte(str(v[4])))
		if err != nil {
			return dedupe.Entry{}, fmt.Errorf("redis get: decoding record: %w", err)
		}
		e.State, e.Record = dedupe.StateRecorded, rec
	}
	return e, nil
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
