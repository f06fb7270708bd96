package redisqueue

// The key schema. Every key of one destination shares the hash tag
// {<destination>}, so each script touches a single Cluster slot.
//
//	<prefix>:q:{<dest>}:env     HASH  id -> fingerprint (8 bytes) + envelope
//	                                  (queued, leased and dead envelopes)
//	<prefix>:q:{<dest>}:due     ZSET  id -> when due, unix ms
//	<prefix>:q:{<dest>}:leased  ZSET  id -> lease end, unix ms (the fencing token)
//	<prefix>:q:{<dest>}:dead    ZSET  id -> dead-lettered at, unix ms
//	<prefix>:q:{<dest>}:done    HASH  id -> fingerprint, for IDs delivered within the retention
//	<prefix>:q:{<dest>}:donet   ZSET  id -> delivered at, unix ms (trims done)
//	<prefix>:q:{<dest>}:paused  STRING "1" while the destination is paused
//
// An envelope is stored once; the indexes hold IDs.
type keys struct {
	env, due, leased, dead, done, donet, paused string
}

func keysOf(prefix, dest string) keys {
	p := prefix + ":q:{" + dest + "}:"
	return keys{env: p + "env", due: p + "due", leased: p + "leased", dead: p + "dead",
		done: p + "done", donet: p + "donet", paused: p + "paused"}
}
