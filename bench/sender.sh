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
	for impl in hookgate asynq bullmq bare; do
		redis-cli -p "$redis_port" flushall >/dev/null
		case $impl in
		hookgate)
			prof=()
			if [ -n "${PROFILE:-}" ]; then mkdir -p "$PROFILE"; prof=(-cpuprofile "$PROFILE/hookgate-$round.pprof"); fi
			line=$("$work/sendbench" run -redis "$redis" -receiver "$rcv" -n "$N" -c "$C" "${prof[@]}")
			;;
		asynq) line=$("$work/asynqbench" -redis "$redis" -receiver "$rcv" -n "$N" -c "$C") ;;
		bullmq) line=$(node bench/bullmq/bench.mjs "$redis" "$rcv" "$N" "$C") ;;
		bare) line=$("$work/sendbench" bare -receiver "$rcv" -n "$N" -c "$C") ;;
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
print(f"\n{'':10} {'deliveries/s':>13} {'vs BullMQ':>10} {'vs asynq':>9} {'vs bare':>8} {'bytes/envelope':>15}")
for k in ("hookgate", "asynq", "bullmq", "bare"):
    r, b = med[k]
    print(f"{k:10} {r:13.0f} {r / med['bullmq'][0]:9.2f}x {r / med['asynq'][0]:8.2f}x {r / med['bare'][0]:7.2f}x {b:15.0f}")
# The ratios of each round (interleaved, so each is a fair pair).
for k in ("asynq", "bare"):
    per = [h / o for (h, _), (o, _) in zip(runs["hookgate"], runs[k])]
    print(f"hookgate / {k} by round: " + ", ".join(f"{x:.2f}x" for x in per))
PY
