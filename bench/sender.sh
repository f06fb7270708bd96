#!/usr/bin/env bash
# The sender side by side with BullMQ 5 and asynq, on one Redis and one
# loopback receiver: each queues 20,000 events of a 500-byte payload (Redis
# memory is read before and after: bytes per queued envelope), then
# delivers them with 20 workers (deliveries/s). Rounds are interleaved, so
# drift touches all alike; it prints each run, then the medians and the
# ratios to BullMQ.
#
#   bash bench/sender.sh               # 3 rounds
#   ROUNDS=5 N=50000 bash bench/sender.sh
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

go build -o "$work/sendbench" ./bench/sendbench
(cd bench/asynq && go build -o "$work/asynqbench" .)
(cd bench/bullmq && npm install --no-audit --no-fund --silent)

rcv_port=$(free_port); redis_port=$(free_port)
"$work/sendbench" receiver -addr "127.0.0.1:$rcv_port" & pids+=($!)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" & pids+=($!)
sleep 0.5
redis="127.0.0.1:$redis_port"; rcv="http://127.0.0.1:$rcv_port"

results="$work/results"
for round in $(seq "$ROUNDS"); do
	for impl in hookgate asynq bullmq; do
		redis-cli -p "$redis_port" flushall >/dev/null
		case $impl in
		hookgate) line=$("$work/sendbench" run -redis "$redis" -receiver "$rcv" -n "$N" -c "$C") ;;
		asynq) line=$("$work/asynqbench" -redis "$redis" -receiver "$rcv" -n "$N" -c "$C") ;;
		bullmq) line=$(node bench/bullmq/bench.mjs "$redis" "$rcv" "$N" "$C") ;;
		esac
		echo "round $round: $line"
		echo "$line" >> "$results"
	done
done

python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    runs.setdefault(f[0], []).append((float(f[2]), float(f[4])))
med = {k: (statistics.median(r for r, _ in v), statistics.median(b for _, b in v)) for k, v in runs.items()}
base = med["bullmq"][0]
print(f"\n{'':10} {'deliveries/s':>13} {'vs BullMQ':>10} {'bytes/envelope':>15}")
for k in ("hookgate", "asynq", "bullmq"):
    r, b = med[k]
    print(f"{k:10} {r:13.0f} {r / base:9.2f}x {b:15.0f}")
PY
