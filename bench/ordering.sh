#!/usr/bin/env bash
# Ordered delivery per entity (issue 33): what `ordering entity` costs.
# Each round queues N events (500-byte payloads) over E entities, round
# robin, then delivers them with C workers to a loopback receiver, once
# with the destination's `ordering none` and once with `ordering entity`
# (which goes first alternates by round), on Redis and on the embedded
# queue. The receiver counts, per entity, deliveries that came before one
# enqueued earlier, and the most one entity had in flight at once.
# Then one entity alone, ordered: its rate, strictly one at a time.
#
# It prints each run, then per store the medians and the ratio
# entity / none (of the medians and by round), and the Redis memory that
# ordering adds per waiting envelope: (bytes/envelope entity - none) x N
# over the N - E envelopes that wait behind their entity's head.
#
#   bash bench/ordering.sh               # 3 rounds, N=20000 E=1000 C=20
#   ROUNDS=5 bash bench/ordering.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
N=${N:-20000}
E=${E:-1000}
C=${C:-20}
ONE=${ONE:-500} # the single entity's events
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

go build -o "$work/sendbench" ./bench/sendbench
rcv_port=$(free_port); redis_port=$(free_port)
"$work/sendbench" receiver -addr "127.0.0.1:$rcv_port" & pids+=($!)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" & pids+=($!)
sleep 0.5
redis="127.0.0.1:$redis_port"; rcv="http://127.0.0.1:$rcv_port"

results="$work/results"
for round in $(seq "$ROUNDS"); do
	order="none entity"
	if [ $((round % 2)) = 0 ]; then order="entity none"; fi
	for store in redis bolt; do
		for ordering in $order; do
			redis-cli -p "$redis_port" flushall >/dev/null
			line=$("$work/sendbench" run -store "$store" -redis "$redis" -receiver "$rcv" -n "$N" -c "$C" -entities "$E" -ordering "$ordering")
			line="$store-$ordering ${line#* }"
			echo "round $round: $line"
			echo "$line" >> "$results"
		done
	done
done
for store in redis bolt; do
	redis-cli -p "$redis_port" flushall >/dev/null
	line=$("$work/sendbench" run -store "$store" -redis "$redis" -receiver "$rcv" -n "$ONE" -c "$C" -entities 1 -ordering entity)
	line="$store-one ${line#* }"
	echo "one entity: $line"
	echo "$line" >> "$results"
done

python3 - "$results" "$N" "$E" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    runs.setdefault(f[0], []).append(dict(zip(f[1::2], f[2::2])))
n, e = int(sys.argv[2]), int(sys.argv[3])
med = lambda k, f: statistics.median(float(x[f]) for x in runs[k])
bad = [k for k, v in runs.items() if k.endswith(("-entity", "-one")) and any(x["out_of_order"] != "0" or x["most_in_flight"] != "1" for x in v)]
print(f"\n{'':14} {'deliveries/s':>13} {'vs none':>8} {'sender µs':>10} {'redis µs':>9} {'bytes/env':>10} {'out of order':>13} {'most in flight':>15}")
for store in ("redis", "bolt"):
    for k in (f"{store}-none", f"{store}-entity", f"{store}-one"):
        r = med(k, "deliveries/s")
        vs = f"{r / med(f'{store}-none', 'deliveries/s'):7.2f}x" if k.endswith("entity") else ""
        print(f"{k:14} {r:13.0f} {vs:>8} {med(k, 'sender_cpu_us'):10.1f} {med(k, 'redis_cpu_us'):9.1f} {med(k, 'bytes/envelope'):10.1f} {max(int(x['out_of_order']) for x in runs[k]):13d} {max(int(x['most_in_flight']) for x in runs[k]):15d}")
    per = [float(b["deliveries/s"]) / float(a["deliveries/s"]) for a, b in zip(runs[f"{store}-none"], runs[f"{store}-entity"])]
    print(f"{store}: entity / none by round: " + ", ".join(f"{x:.2f}x" for x in per) + f" (median {statistics.median(per):.2f}x)")
extra = (med("redis-entity", "bytes/envelope") - med("redis-none", "bytes/envelope")) * n / (n - e)
print(f"Redis memory that ordering adds per waiting envelope: {extra:.1f} bytes")
if bad:
    print("ORDER BROKEN in: " + ", ".join(bad))
    sys.exit(1)
PY
