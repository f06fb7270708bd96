#!/usr/bin/env bash
# Side by side on loopback: plain Caddy reverse_proxy, and hookgate (verify +
# dedupe) on Redis and on the embedded store, in front of the same upstream,
# with unique delivery IDs and with duplicates. Prints requests/s, p99, the
# ratios to plain reverse_proxy, and Redis commands per request.
#
#   bash bench/run.sh            # 10s per run, 32 clients
#   DURATION=30s CONC=64 bash bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONC=${CONC:-32}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

go build -o "$work/hookgate" ./cmd/hookgate
go build -o "$work/loadgen" ./bench/loadgen

up_port=$(free_port); redis_port=$(free_port)
"$work/loadgen" upstream -addr "127.0.0.1:$up_port" & pids+=($!)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" & pids+=($!)
sleep 0.5

secret=whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA==
run_gateway() { # name, global options, handlers
	local name=$1 global=$2 handlers=$3 port admin
	port=$(free_port); admin=$(free_port)
	cat > "$work/$name.Caddyfile" <<CADDY
{
	admin 127.0.0.1:$admin
	persist_config off
	log {
		level ERROR
	}
	$global
}
http://127.0.0.1:$port {
	$handlers
	reverse_proxy 127.0.0.1:$up_port
}
CADDY
	XDG_DATA_HOME="$work/data-$name" "$work/hookgate" run --config "$work/$name.Caddyfile" > "$work/$name.log" 2>&1 &
	gw_pid=$!
	for _ in $(seq 100); do curl -fs "http://127.0.0.1:$admin/config/" >/dev/null 2>&1 && break; sleep 0.1; done
	gw_url="http://127.0.0.1:$port/"
}

bench() { # label, mode
	"$work/loadgen" -url "$gw_url" -mode "$2" -c "$CONC" -d "$DURATION" -label "$1" | tee -a "$work/results"
}

# Round trips to Redis: top-level calls (scripts and plain commands the
# client sends; the bench path sends only scripts), not the commands a
# script runs inside Redis. The dup run's priming request costs 2.
redis_calls() { redis-cli -p "$redis_port" info commandstats | awk -F'[:=,]' '/^cmdstat_(evalsha|eval)/ {n += $3} END {print n+0}'; }

verify_dedupe="webhook_verify {
		secret $secret
	}
	webhook_dedupe"

echo "# $(date -u +%FT%TZ) $(nproc) cores, $CONC clients, $DURATION per run, 1 KiB bodies"

run_gateway plain "" ""
bench plain-unique unique
kill $gw_pid; wait $gw_pid 2>/dev/null || true

run_gateway redis "hookgate {
		store redis redis://127.0.0.1:$redis_port
	}" "$verify_dedupe"
c0=$(redis_calls); bench redis-unique unique; c1=$(redis_calls)
c1b=$(redis_calls); bench redis-dup dup; c2=$(redis_calls)
kill $gw_pid; wait $gw_pid 2>/dev/null || true

run_gateway file "" "$verify_dedupe"
bench file-unique unique
bench file-dup dup
kill $gw_pid; wait $gw_pid 2>/dev/null || true

echo
awk -v c0="$c0" -v c1="$c1" -v c1b="$c1b" -v c2="$c2" '
	{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1]] = kv[2] } names[++n] = $1 }
	END {
		base = v["plain-unique", "rps"]
		printf "%-14s %10s %9s %14s\n", "run", "req/s", "p99 ms", "vs plain rps"
		for (i = 1; i <= n; i++) printf "%-14s %10s %9s %13.2fx\n", names[i], v[names[i], "rps"], v[names[i], "p99_ms"], v[names[i], "rps"] / base
		printf "\nRedis round trips per request: unique IDs %.2f, duplicates %.2f\n", (c1 - c0) / v["redis-unique", "requests"], (c2 - c1b - 2) / v["redis-dup", "requests"]
	}' "$work/results"
