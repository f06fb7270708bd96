package redisstore

// The key schema. Every key of one delivery shares the hash tag {<key>},
// so each script touches a single Cluster slot.

// entryKey is a STRING holding one dedupe key's entry, laid out as
// entry.go says: the state, the take-over flag, the body fingerprint, the
// fencing token (kept once recorded, so a retried record under it is
// recognised), then the lease end and logical expiry (claimed) or the
// logical expiry and the record (recorded). The entry is absent from its
// logical expiry on.
//
// Redis also expires it (PX) a little after its expiry, to reclaim memory;
// correctness rests on the logical expiry, judged by the caller's clock.
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

// keptKey is a STRING holding a value kept once and for good (Store.Keep):
// set by SET NX, never changed, and without a TTL, so that no eviction
// policy but allkeys-* drops it.
func keptKey(prefix, key string) string {
	return prefix + ":kept:{" + key + "}"
}
