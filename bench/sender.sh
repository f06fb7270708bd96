#!/usr/bin/env bash
# The sender side by side with BullMQ 5 and asynq, on one Redis and one
# loopback receiver: each queues 20,000 events of a 500-byte payload (Redis
# memory is read before and after: bytes per queued envelope), then
# delivers them with 20 workers (deliveries/s). The limit is measured in
# the same rounds: a bare Go HTTP client loop (sendbench bare) POSTing the
# same payload to the same receiver from as many goroutines, a keep-alive
# connection each, as fast as it can, with no queue and no signature.
# Rounds are interleaved, so drift touches all alike; it prints each run,
# then the medians and the ratios to BullMQ, asynq and the bare loop.
#
#   bash bench/sender.sh               # 3 rounds
#   ROUNDS=5 N=50000 bash bench/sender.sh
#   PROFILE=/tmp/prof ROUNDS=1 bash bench/sender.sh  # and a CPU profile of hookgate's deliveries
#   REPLICA=1 ROUNDS=5 bash bench/sender.sh  # the cost of min_replicas 1 (issue 32)
#
# REPLICA=1 gives the Redis one replica on loopback and runs hookgate
# twice a round, with min_replicas 0 (hookgate) and 1 (hookgate-w1: WAIT
# after each enqueue and settle; which goes first alternates by round),
# beside the bare loop (asynq and BullMQ
# do not run); it prints the ratio w1 / w0, of the medians and by round.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
N=${N:-20000}
C=${C:-20}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

REPLICA=${REPLICA:-}
go build -o "$work/sendbench" ./bench/sendbench
if [ -z "$REPLICA" ]; then
	(cd bench/asynq && go build -o "$work/asynqbench" .)
	(cd bench/bullmq && npm install --no-audit --no-fund --silent)
fi

rcv_port=$(free_port); redis_port=$(free_port)
"$work/sendbench" receiver -addr "127.0.0.1:$rcv_port" & pids+=($!)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" & pids+=($!)
sleep 0.5
redis="127.0.0.1:$redis_port"; rcv="http://127.0.0.1:$rcv_port"
impls="hookgate asynq bullmq bare"
if [ -n "$REPLICA" ]; then
	replica_port=$(free_port)
	redis-server --port "$replica_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --dbfilename replica.rdb --logfile "$work/replica.log" --replicaof 127.0.0.1 "$redis_port" & pids+=($!)
	for _ in $(seq 100); do redis-cli -p "$redis_port" info replication | grep -q 'slave0:.*state=online' && break; sleep 0.1; done
	redis-cli -p "$redis_port" info replication | grep -q 'slave0:.*state=online' || { echo "the replica did not come online" >&2; exit 1; }
	impls="hookgate hookgate-w1 bare"
fi

results="$work/results"
for round in $(seq "$ROUNDS"); do
	order=$impls
	if [ -n "$REPLICA" ] && [ $((round % 2)) = 0 ]; then order="hookgate-w1 hookgate bare"; fi # which goes first alternates
	for impl in $order; do
		redis-cli -p "$redis_port" flushall >/dev/null
		case $impl in
		hookgate)
			prof=()
			if [ -n "${PROFILE:-}" ]; then mkdir -p "$PROFILE"; prof=(-cpuprofile "$PROFILE/hookgate-$round.pprof"); fi
			line=$("$work/sendbench" run -redis "$redis" -receiver "$rcv" -n "$N" -c "$C" "${prof[@]}")
			;;
		hookgate-w1)
			prof=()
			if [ -n "${PROFILE:-}" ]; then mkdir -p "$PROFILE"; prof=(-cpuprofile "$PROFILE/hookgate-w1-$round.pprof"); fi
			line=$("$work/sendbench" run -redis "$redis" -receiver "$rcv" -n "$N" -c "$C" -min-replicas 1 "${prof[@]}")
			line="hookgate-w1 ${line#hookgate }"
			;;
		asynq) line=$("$work/asynqbench" -redis "$redis" -receiver "$rcv" -n "$N" -c "$C") ;;
		bullmq) line=$(node bench/bullmq/bench.mjs "$redis" "$rcv" "$N" "$C") ;;
		bare) line=$("$work/sendbench" bare -receiver "$rcv" -n "$N" -c "$C") ;;
		esac
		echo "round $round: $line"
		echo "$line" >> "$results"
	done
done

python3 - "$results" "$REPLICA" <<'PY'
import statistics, sys
runs = {}
extra = {}
for line in open(sys.argv[1]):
    f = line.split()
    runs.setdefault(f[0], []).append((float(f[2]), float(f[4])))
    extra.setdefault(f[0], []).append(dict(zip(f[5::2], f[6::2])))
med = {k: (statistics.median(r for r, _ in v), statistics.median(b for _, b in v)) for k, v in runs.items()}
if sys.argv[2]:
    # min_replicas 1 beside 0, on one master with one replica.
    print(f"\n{'':12} {'deliveries/s':>13} {'vs w0':>6} {'vs bare':>8} {'bytes/env':>10} {'sender µs':>10} {'redis µs':>9} {'enqueue µs':>11} {'WAIT/deliv':>11} {'short':>6}")
    for k in ("hookgate", "hookgate-w1", "bare"):
        r, b = med[k]
        m = lambda f: statistics.median(float(x.get(f, "nan")) for x in extra[k])
        cols = f"{m('sender_cpu_us'):10.1f} {m('redis_cpu_us'):9.1f} {m('enqueue_us'):11.1f} {m('waits_per_delivery'):11.3f} {m('shortfalls'):6.0f}" if k != "bare" else ""
        print(f"{k:12} {r:13.0f} {r / med['hookgate'][0]:5.2f}x {r / med['bare'][0]:7.2f}x {b:10.0f} {cols}")
    per = [w / h for (h, _), (w, _) in zip(runs["hookgate"], runs["hookgate-w1"])]
    print("hookgate-w1 / hookgate by round: " + ", ".join(f"{x:.2f}x" for x in per) + f" (median {statistics.median(per):.2f}x)")
    enq = [float(w["enqueue_us"]) / float(h["enqueue_us"]) for h, w in zip(extra["hookgate"], extra["hookgate-w1"])]
    print("enqueue latency w1 / w0 by round: " + ", ".join(f"{x:.2f}x" for x in enq))
    sys.exit(0)
print(f"\n{'':10} {'deliveries/s':>13} {'vs BullMQ':>10} {'vs asynq':>9} {'vs bare':>8} {'bytes/envelope':>15}")
for k in ("hookgate", "asynq", "bullmq", "bare"):
    r, b = med[k]
    print(f"{k:10} {r:13.0f} {r / med['bullmq'][0]:9.2f}x {r / med['asynq'][0]:8.2f}x {r / med['bare'][0]:7.2f}x {b:15.0f}")
# The ratios of each round (interleaved, so each is a fair pair).
for k in ("asynq", "bare"):
    per = [h / o for (h, _), (o, _) in zip(runs["hookgate"], runs[k])]
    print(f"hookgate / {k} by round: " + ", ".join(f"{x:.2f}x" for x in per))
PY
