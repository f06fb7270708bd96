package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
)

// hashStore is the Store as it was before the entry became one string: a
// HASH per key, a claim and a record script of several commands each. It
// writes the entries a Redis shared with an earlier version holds (the
// rolling-upgrade tests read them with the Store) and is the baseline of
// BenchmarkClaimRecord.
type hashStore struct{ *Store }

var legacyClaimScript = redis.NewScript(`
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

func (s hashStore) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	gc := c.Retention + gcSlack
	v, err := s.eval(ctx, legacyClaimScript, "evalsha", legacyClaimScript.Hash(), 1, entryKey(s.prefix, key),
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
		s1, _ := v[1].(string)
		rec, err := dedupe.UnmarshalRecord([]byte(s1))
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim: decoding record: %w", err)
		}
		s2, _ := v[2].(string)
		exp, err := strconv.ParseInt(s2, 10, 64)
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim: bad expiry %v", v[2])
		}
		res.Record, res.Expires = rec, time.UnixMilli(exp)
	default:
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim: unexpected answer %v", v)
	}
	return res, nil
}

var legacyRecordScript = redis.NewScript(`
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

func (s hashStore) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	b := dedupe.MarshalRecord(rec)
	n, err := s.eval(ctx, legacyRecordScript, "evalsha", legacyRecordScript.Hash(), 1, entryKey(s.prefix, key),
		token, b, ms(now.Add(retention)), (retention + gcSlack).Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("redis record: %w", err)
	}
	if n == 0 {
		return dedupe.ErrClaimLost
	}
	return nil
}
