package redisstore

// The key schema. Every key of one delivery shares the hash tag {<key>},
// so each script touches a single Cluster slot.

// entryKey is a HASH holding one dedupe key's entry:
//
//	s    "c" (claimed) or "r" (recorded)
//	fp   the body fingerprint, hex
//	tok  the fencing token of the claim (kept once recorded, so a retried
//	     record under it is recognised)
//	lu   lease until, unix ms (claimed only)
//	exp  logical expiry, unix ms: the entry is absent from then on
//	rec  the recorded response, dedupe.MarshalRecord (recorded only)
//	to   "1" when the claim took over an expired lease, so a retried
//	     claim under the same token answers as the first did
//
// Redis also expires it (PEXPIRE) a little after exp, to reclaim memory;
// correctness rests on exp, judged by the caller's clock.
func entryKey(prefix, key string) string {
	return prefix + ":dedupe:{" + key + "}"
}

// entityKey is a HASH holding one entity's freshness state:
//
//	wm   the watermark: newest event time (unix µs) or sequence applied
//	we   the watermark's logical expiry, unix ms
//	tok  the entity lease's token ("" when free)
//	lu   lease until, unix ms
//
// Redis expires it a minute after the later of the watermark's expiry and
// the lease.
func entityKey(prefix, entity string) string {
	return prefix + ":fresh:{" + entity + "}"
}
