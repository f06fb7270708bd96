package redisqueue

// The key schema. Every key of one destination shares the hash tag
// {<destination>}, so each script touches a single Cluster slot.
//
//	<prefix>:q:{<dest>}:env     HASH  id -> fingerprint (8 bytes) + envelope
//	                                  (queued, leased and dead envelopes)
//	<prefix>:q:{<dest>}:ready   LIST  ids due now, oldest first
//	<prefix>:q:{<dest>}:due     ZSET  id -> when due, unix ms (scheduled retries)
//	<prefix>:q:{<dest>}:leased  ZSET  id -> lease end, unix ms (the fencing token)
//	<prefix>:q:{<dest>}:dead    ZSET  id -> dead-lettered at, unix ms
//	<prefix>:q:{<dest>}:done    HASH  id -> fingerprint, for IDs delivered within the retention
//	<prefix>:q:{<dest>}:donet   ZSET  id -> delivered at, unix ms (trims done)
//	<prefix>:q:{<dest>}:paused  STRING who paused it, while the destination is paused
//	<prefix>:q:{<dest>}:corrupt HASH  id -> an entry that did not decode, set aside
//
// An envelope is stored once; the indexes hold IDs. An envelope due at
// once (a new event, a redrive, a released lease) goes on the ready list,
// which costs a few bytes an entry; only a retry waiting for its time is
// in the sorted set, and the lease script moves it to the list when due.
type keys struct {
	env, ready, due, leased, dead, done, donet, paused, corrupt string
}

func keysOf(prefix, dest string) keys {
	p := prefix + ":q:{" + dest + "}:"
	return keys{env: p + "env", ready: p + "ready", due: p + "due", leased: p + "leased", dead: p + "dead",
		done: p + "done", donet: p + "donet", paused: p + "paused", corrupt: p + "corrupt"}
}
