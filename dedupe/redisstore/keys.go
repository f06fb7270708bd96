package redisstore

// The key schema. Every key of one delivery shares the hash tag {<key>},
// so each script touches a single Cluster slot.

// entryKey is a HASH holding one dedupe key's entry:
//
//	s    "c" (claimed) or "r" (recorded)
//	fp   the body fingerprint, hex
//	tok  the fencing token of the claim (claimed only)
//	lu   lease until, unix ms (claimed only)
//	exp  logical expiry, unix ms: the entry is absent from then on
//	rec  the recorded response, JSON (recorded only)
//
// Redis also expires it (PEXPIRE) a little after exp, to reclaim memory;
// correctness rests on exp, judged by the caller's clock.
func entryKey(prefix, key string) string {
	return prefix + ":dedupe:{" + key + "}"
}
