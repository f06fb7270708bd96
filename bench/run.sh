#!/usr/bin/env bash
# Side by side on loopback: plain Caddy reverse_proxy, webhook_verify alone,
# and hookgate (verify + dedupe) on Redis (with and without the replay cache)
# and on the embedded store, in front of the same upstream,
# with unique delivery IDs and with duplicates. Each round runs every
# configuration once (interleaved, so drift touches all alike); prints each
# run's line, then the median requests/s per configuration, its range, the
# ratio of medians to plain reverse_proxy, and Redis round trips per request.
#
#   bash bench/run.sh                      # 3 rounds of 10s runs, 32 clients
#   ROUNDS=5 DURATION=30s CONC=64 bash bench/run.sh
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
	gw_pid=$!; pids+=($gw_pid)
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

ROUNDS=${ROUNDS:-3}
echo "# $(date -u +%FT%TZ) $(nproc) cores, $CONC clients, $DURATION per run, 1 KiB bodies, $ROUNDS rounds (interleaved; medians below)"

# All three gateways run side by side (idle when not under load); each
# round measures every configuration once, so drift on a noisy machine
# touches all of them alike.
run_gateway plain "" ""
plain_url=$gw_url
run_gateway verify "" "webhook_verify {
		secret $secret
	}"
verify_url=$gw_url
run_gateway redis "hookgate {
		store redis redis://127.0.0.1:$redis_port
	}" "$verify_dedupe"
redis_url=$gw_url
run_gateway redisnc "hookgate {
		store redis redis://127.0.0.1:$redis_port
	}" "webhook_verify {
		secret $secret
	}
	webhook_dedupe {
		replay_cache off
	}"
redisnc_url=$gw_url
run_gateway file "" "$verify_dedupe"
file_url=$gw_url

calls_unique=0 calls_dup=0 calls_nc=0
for round in $(seq "$ROUNDS"); do
	gw_url=$plain_url; bench plain-unique unique
	gw_url=$verify_url; bench verify-only unique
	gw_url=$redis_url
	c0=$(redis_calls); bench redis-unique unique; c1=$(redis_calls)
	bench redis-dup dup; c2=$(redis_calls)
	gw_url=$redisnc_url; bench redis-dup-nocache dup; c3=$(redis_calls)
	calls_unique=$((calls_unique + c1 - c0)); calls_dup=$((calls_dup + c2 - c1 - 2)); calls_nc=$((calls_nc + c3 - c2 - 2))
	gw_url=$file_url; bench file-unique unique; bench file-dup dup
done

echo
awk -v cu="$calls_unique" -v cd="$calls_dup" -v cn="$calls_nc" '
	function median(name,   n, i, j, t, a) {
		n = cnt[name]
		for (i = 1; i <= n; i++) a[i] = rps[name, i]
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (!($1 in cnt)) names[++n] = $1
		c = ++cnt[$1]; rps[$1, c] = v["rps"]; p99[$1, c] = v["p99_ms"]; reqs[$1] += v["requests"]
	}
	END {
		base = median("plain-unique")
		printf "%-18s %14s %12s %14s\n", "run", "median req/s", "range", "vs plain"
		for (i = 1; i <= n; i++) {
			lo = hi = rps[names[i], 1]
			for (j = 2; j <= cnt[names[i]]; j++) { r = rps[names[i], j]; if (r < lo) lo = r; if (r > hi) hi = r }
			printf "%-18s %14.0f %5.0f-%-6.0f %13.2fx\n", names[i], median(names[i]), lo, hi, median(names[i]) / base
		}
		printf "\nRedis round trips per request: unique IDs %.2f, duplicates %.4f (replay cache), %.2f (cache off)\n", cu / reqs["redis-unique"], cd / reqs["redis-dup"], cn / reqs["redis-dup-nocache"]
	}' "$work/results"
