package redisqueue

// The key schema. Every key of one destination shares the hash tag
// {<destination>}, so each script touches a single Cluster slot.
//
//	<prefix>:q:{<dest>}:meta    HASH  id -> the envelope's record (sender.MarshalMeta):
//	                                  everything but the payload and the attempt log
//	<prefix>:q:{<dest>}:body    HASH  id -> the payload, byte for byte
//	<prefix>:q:{<dest>}:log     HASH  id -> the attempt log (sender.MarshalLog), absent while empty
//	<prefix>:q:{<dest>}:ready   LIST  ids due now, oldest first
//	<prefix>:q:{<dest>}:due     ZSET  id -> when due, unix ms (scheduled retries)
//	<prefix>:q:{<dest>}:leased  ZSET  id -> lease end, unix ms by Redis TIME (the fencing token)
//	<prefix>:q:{<dest>}:dead    ZSET  id -> dead-lettered at, unix ms
//	<prefix>:q:{<dest>}:hist    STREAM what settled (delivered, and dead as it died), by when:
//	                                  entry ID <settled ms>-<seq>, fields i (id), s (d or x),
//	                                  m (the record), l (the attempt log); kept for History.Keep
//	<prefix>:q:{<dest>}:hidx    HASH  id -> its newest hist entry ID: History's "listed as it
//	                                  settled last", Get of a delivered envelope, and the
//	                                  enqueue's idempotency for delivered IDs; its HLEN is
//	                                  Stats.History (one per ID; hist also holds the entries
//	                                  an envelope settled again left, until trimmed)
//	<prefix>:q:{<dest>}:hpay    HASH  id -> a delivered envelope's payload, for History.Payload
//	<prefix>:q:{<dest>}:hpayt   ZSET  id -> when that payload goes, unix ms (trims hpay)
//	<prefix>:q:{<dest>}:histmv  STREAM a Move's merge of another destination's history with
//	                                  this one's, renamed over hist when done
//	<prefix>:q:{<dest>}:histmvidx HASH id -> its entry ID in histmv, while a Move applies it
//	<prefix>:q:{<dest>}:paused  STRING who paused it, while the destination is paused
//	<prefix>:q:{<dest>}:corrupt HASH  id -> an entry that did not decode, set aside
//	<prefix>:q:{<dest>}:rdc     HASH  <redrive id>:m|d|x|s -> letters moved, delivered,
//	                                  dead again, superseded (a redrive's progress)
//	<prefix>:q:{<dest>}:rdt     ZSET  redrive id -> first moved at, unix ms (trims rdc)
//	<prefix>:q:{<dest>}:e:<entity> LIST the entity's unsettled envelopes in enqueue order,
//	                                  its head first (ordering entity): only the head
//	                                  is in ready, due, leased or (held) dead
//	<prefix>:q:{<dest>}:ents    SET   the entities that have such a list
//	<prefix>:q:{<dest>}:oc      HASH  w -> envelopes waiting behind a head, h -> entities
//	                                  held behind a dead head
//	<prefix>:q:dests            SET   every destination name that was ever written to
//	                                  (Destinations: finding orphans is not a scan)
//	<prefix>:q:since            HASH  destination -> first seen, unix ms (FirstSeen: a
//	                                  fan-out completes an event only where it was due)
//
// A scan (list, count, summary, redrive, purge) reads meta alone; the
// payload is read to deliver it and to show one envelope. An envelope due
// at once (a new event, a redrive, a released lease) goes on the ready
// list, which costs a few bytes an entry; only a retry waiting for its
// time is in the sorted set, and the lease script moves it to the list
// when due.
type keys struct {
	meta, body, log, ready, due, leased, dead, paused, corrupt, rdc, rdt string
	hist, hidx, hpay, hpayt, histmv, histmvidx                           string
	ent, ents, oc                                                        string // ent: the entity lists' key prefix
}

// keysOf is dest's keys, made once per destination for the hot paths
// (Enqueue, Lease, Settle: the sender's configured destinations); the
// other operations, which may name any destination, make theirs.
func (q *Queue) keysOf(dest string) keys {
	if k, ok := q.keys.Load(dest); ok {
		return *k.(*keys)
	}
	k := keysOf(q.prefix, dest)
	q.keys.Store(dest, &k)
	return k
}

func keysOf(prefix, dest string) keys {
	p := prefix + ":q:{" + dest + "}:"
	return keys{meta: p + "meta", body: p + "body", log: p + "log", ready: p + "ready", due: p + "due",
		leased: p + "leased", dead: p + "dead", paused: p + "paused",
		corrupt: p + "corrupt", rdc: p + "rdc", rdt: p + "rdt",
		hist: p + "hist", hidx: p + "hidx", hpay: p + "hpay", hpayt: p + "hpayt",
		histmv: p + "histmv", histmvidx: p + "histmvidx",
		ent: p + "e:", ents: p + "ents", oc: p + "oc"}
}

// destsKey is the SET of destination names.
func destsKey(prefix string) string { return prefix + ":q:dests" }

// sinceKey is the HASH of destinations' first-seen times.
func sinceKey(prefix string) string { return prefix + ":q:since" }
