#!/usr/bin/env bash
# Side by side on loopback: plain Caddy reverse_proxy, Caddy's own `respond`
# (a static answer from memory: the limit of a replay), webhook_verify
# alone, and hookgate (verify + dedupe) on Redis (with and without the
# replay cache) and on the embedded store, in front of the same upstream,
# with unique delivery IDs and with duplicates. Each round runs every
# configuration once at each concurrency (interleaved, so drift touches all
# alike); prints each run's line, then per concurrency the median
# requests/s, p50 and p99 of each configuration, the ratio of medians to
# plain reverse_proxy (and, for `respond` and the duplicate runs, to
# `respond`), the Redis commands and round trips per request, and
# where the CPU went: microseconds of CPU per request of the gateway under
# load, of redis-server and of the upstream, and how busy the machine was
# (every process's CPU, the load generator's too, over all cores).
#
#   ROUNDS=5 CONCS="64 128" bash bench/run.sh   # issue 23's comparison: 5 rounds of 10s runs, 64 and 128 clients
#   bash bench/run.sh                      # 3 rounds of 10s runs, 32 and 128 clients
#   ROUNDS=1 DURATION=5s CONCS=64 bash bench/run.sh  # a quick look
#   ROUNDS=5 DURATION=30s CONCS="64" bash bench/run.sh
#   PROFILE=/tmp/prof ROUNDS=1 bash bench/run.sh  # and a CPU profile of each run
#   REPLICA=1 ROUNDS=3 CONCS=64 bash bench/run.sh  # the cost of min_replicas 1 (issue 32)
#
# REPLICA=1 gives the bench Redis one replica on loopback (every
# configuration on Redis then runs against a replicated master) and adds
# redis-w1, hookgate on Redis with min_replicas 1 (a WAIT ends each shared
# pipeline that writes), measured in the same rounds right beside redis
# (which of the two goes first alternates by round); it
# prints the ratio redis-w1 / redis, of the medians and by round, the
# WAITs per request (cmdstat_wait, on the master) and the replica's CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONCS=${CONCS:-${CONC:-32 128}}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

go build -o "$work/hookgate" ./cmd/hookgate
go build -o "$work/loadgen" ./bench/loadgen

up_port=$(free_port); redis_port=$(free_port)
"$work/loadgen" upstream -addr "127.0.0.1:$up_port" & pids+=($!)
up_pid=$!
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" & pids+=($!)
redis_pid=$!
sleep 0.5
REPLICA=${REPLICA:-}
if [ -n "$REPLICA" ]; then
	replica_port=$(free_port)
	redis-server --port "$replica_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --dbfilename replica.rdb --logfile "$work/replica.log" --replicaof 127.0.0.1 "$redis_port" & pids+=($!)
	replica_pid=$!
	for _ in $(seq 100); do redis-cli -p "$redis_port" info replication | grep -q 'slave0:.*state=online' && break; sleep 0.1; done
	redis-cli -p "$redis_port" info replication | grep -q 'slave0:.*state=online' || { echo "the replica did not come online" >&2; exit 1; }
fi

secret=whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA==
run_gateway() { # name, global options, handlers[, terminal handler: reverse_proxy to the upstream]
	local name=$1 global=$2 handlers=$3 terminal=${4:-"reverse_proxy 127.0.0.1:$up_port"} port admin
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
	$terminal
}
CADDY
	XDG_DATA_HOME="$work/data-$name" "$work/hookgate" run --config "$work/$name.Caddyfile" > "$work/$name.log" 2>&1 &
	gw_pid=$!; pids+=($gw_pid)
	for _ in $(seq 100); do curl -fs "http://127.0.0.1:$admin/config/" >/dev/null 2>&1 && break; sleep 0.1; done
	gw_url="http://127.0.0.1:$port/"
	admin_of[$gw_url]=$admin
	pid_of[$gw_url]=$gw_pid
}
declare -A admin_of pid_of

# CPU time of a process (clock ticks, user + system), and of the machine
# (busy and total ticks, every process's, the load generator's too).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
machine() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }

# bench runs loadgen and appends its line, with the Redis commands and
# round trips the run cost, to the results.
bench() { # label, mode
	local before after prof= cpu0 cpu1
	before=$(redis_counts)
	cpu0="$(ticks "${pid_of[$gw_url]}") $(ticks "$redis_pid") $(ticks "$up_pid") $(machine)"
	if [ -n "${PROFILE:-}" ]; then # a CPU profile of the gateway under load, second 1 to the end
		mkdir -p "$PROFILE"
		curl -fs -o "$PROFILE/$1@$conc.allocs0" "http://127.0.0.1:${admin_of[$gw_url]}/debug/pprof/allocs" || true
		(sleep 1; curl -fs -o "$PROFILE/$1@$conc.pprof" "http://127.0.0.1:${admin_of[$gw_url]}/debug/pprof/profile?seconds=$((${DURATION%s} - 2))") & prof=$!
	fi
	local rpl0=
	if [ -n "$REPLICA" ]; then rpl0=$(ticks "$replica_pid"); fi
	"$work/loadgen" -url "$gw_url" -mode "$2" -c "$conc" -d "$DURATION" -label "$1@$conc" > "$work/line"
	if [ -n "$prof" ]; then # and what it allocated: go tool pprof -diff_base X.allocs0 X.allocs1
		wait "$prof" || true
		curl -fs -o "$PROFILE/$1@$conc.allocs1" "http://127.0.0.1:${admin_of[$gw_url]}/debug/pprof/allocs" || true
	fi
	cpu1="$(ticks "${pid_of[$gw_url]}") $(ticks "$redis_pid") $(ticks "$up_pid") $(machine)"
	after=$(redis_counts)
	local replica=
	if [ -n "$REPLICA" ]; then # the WAITs the master ran, and the replica's CPU ticks
		replica=" $(echo "$before $after $rpl0 $(ticks "$replica_pid")" | awk '{printf "redis_waits=%d replica_ticks=%d", $8 - $4, $10 - $9}')"
	fi
	echo "$(cat "$work/line") $(echo "$before $after" | awk '{printf "redis_cmds=%d redis_reads=%d redis_script_usec=%d", $5 - $1, $6 - $2, $7 - $3}')$replica" \
		"$(echo "$cpu0 $cpu1" | awk -v hz="$(getconf CLK_TCK)" -v line="$(cat "$work/line")" '{
			match(line, /requests=[0-9]+/); n = substr(line, RSTART + 9, RLENGTH - 9) + 0; if (n == 0) n = 1
			us = 1e6 / hz / n
			printf "gw_us=%.0f redis_us=%.0f up_us=%.0f busy_pct=%.0f", ($6 - $1) * us, ($7 - $2) * us, ($8 - $3) * us, 100 * ($9 - $4) / ($10 - $5)
		}')" | tee -a "$work/results"
}

# Redis counters: top-level commands the clients sent (scripts and plain
# commands, not the ones a script runs inside Redis), the microseconds
# Redis spent running the scripts, and read events
# (total_reads_processed: one per socket read, so a pipeline read at once
# counts one): the round trips. The dup run's priming request and the
# redis-cli calls themselves add a handful. Last, the WAITs (min_replicas).
redis_counts() {
	redis-cli -p "$redis_port" info all | tr -d '\r' | awk -F'[:=,]' '
		/^cmdstat_(evalsha|eval)/ {n += $3; u += $5}
		/^cmdstat_wait:/ {w = $3}
		/^total_reads_processed:/ {r = $2}
		END {print n+0, r+0, u+0, w+0}'
}

verify_dedupe="webhook_verify {
		secret $secret
	}
	webhook_dedupe"

ROUNDS=${ROUNDS:-3}
echo "# $(date -u +%FT%TZ) $(nproc) cores, $CONCS clients, $DURATION per run, 1 KiB bodies, $ROUNDS rounds (interleaved; medians below)"

# All three gateways run side by side (idle when not under load); each
# round measures every configuration once, so drift on a noisy machine
# touches all of them alike.
run_gateway plain "" ""
plain_url=$gw_url
# The upstream's own answer, from memory, by Caddy alone.
run_gateway respond "" "" 'respond `{"enrolled":true}` 200'
respond_url=$gw_url
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
if [ -n "$REPLICA" ]; then
	run_gateway redisw1 "hookgate {
		store redis redis://127.0.0.1:$redis_port {
			min_replicas 1
		}
	}" "$verify_dedupe"
	redisw1_url=$gw_url
fi
run_gateway file "" "$verify_dedupe"
file_url=$gw_url

for round in $(seq "$ROUNDS"); do
	for conc in $CONCS; do
		gw_url=$plain_url; bench plain-unique unique
		# The duplicate runs' requests: one signed delivery, sent again and again.
		gw_url=$respond_url; bench respond dup
		gw_url=$verify_url; bench verify-only unique
		if [ -z "$REPLICA" ]; then
			gw_url=$redis_url; bench redis-unique unique; bench redis-dup dup
		elif [ $((round % 2)) = 1 ]; then # each pair side by side, which goes first alternating by round
			gw_url=$redis_url; bench redis-unique unique; gw_url=$redisw1_url; bench redis-w1-unique unique
			gw_url=$redis_url; bench redis-dup dup; gw_url=$redisw1_url; bench redis-w1-dup dup
		else
			gw_url=$redisw1_url; bench redis-w1-unique unique; gw_url=$redis_url; bench redis-unique unique
			gw_url=$redisw1_url; bench redis-w1-dup dup; gw_url=$redis_url; bench redis-dup dup
		fi
		gw_url=$redisnc_url; bench redis-dup-nocache dup
		gw_url=$file_url; bench file-unique unique; bench file-dup dup
	done
done

echo
awk '
	function median(name, field,   n, i, j, t, a) {
		n = cnt[name]
		for (i = 1; i <= n; i++) a[i] = val[name, field, i]
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (!($1 in cnt)) names[++n] = $1
		c = ++cnt[$1]
		val[$1, "rps", c] = v["rps"]; val[$1, "p50", c] = v["p50_ms"]; val[$1, "p99", c] = v["p99_ms"]
		reqs[$1] += v["requests"]; cmds[$1] += v["redis_cmds"]; reads[$1] += v["redis_reads"]; lua[$1] += v["redis_script_usec"]
		val[$1, "gw", c] = v["gw_us"]; val[$1, "redis", c] = v["redis_us"]; val[$1, "up", c] = v["up_us"]; val[$1, "busy", c] = v["busy_pct"]
	}
	END {
		printf "%-22s %7s %13s %6s %6s %7s %7s %5s %6s %6s %6s %6s %6s %5s\n", "run", "req/s", "range", "plain", "resp", "p50 ms", "p99 ms", "cmds", "trips", "gw µs", "rds µs", "lua µs", "up µs", "busy"
		for (i = 1; i <= n; i++) {
			name = names[i]; split(name, parts, "@")
			base = median("plain-unique@" parts[2], "rps")
			resp = "-"
			if ((name ~ /dup/ || name ~ /^respond@/) && ("respond@" parts[2]) in cnt) resp = sprintf("%.2fx", median(name, "rps") / median("respond@" parts[2], "rps"))
			lo = hi = val[name, "rps", 1]
			for (j = 2; j <= cnt[name]; j++) { r = val[name, "rps", j]; if (r < lo) lo = r; if (r > hi) hi = r }
			trips = "-"; cpr = "-"; lus = "-"
			if (name ~ /^redis/) { cpr = sprintf("%.2f", cmds[name] / reqs[name]); trips = sprintf("%.2f", reads[name] / reqs[name]); lus = sprintf("%.0f", lua[name] / reqs[name]) }
			printf "%-22s %7.0f %6.0f-%-6.0f %5.2fx %6s %7.2f %7.2f %5s %6s %6.0f %6.0f %6s %6.0f %4.0f%%\n", name, median(name, "rps"), lo, hi, median(name, "rps") / base, resp, median(name, "p50"), median(name, "p99"), cpr, trips, median(name, "gw"), median(name, "redis"), lus, median(name, "up"), median(name, "busy")
		}
	}' "$work/results"

if [ -n "$REPLICA" ]; then
	# min_replicas 1 beside 0: the ratio of the medians, and of each
	# round's pair (run next to each other, so each is a fair pair); the
	# WAITs per request the master ran, and the replica's CPU per request.
	echo
	awk -v hz="$(getconf CLK_TCK)" '
		function med(a, n,   i, j, t) {
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		{
			delete v
			for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			if (!($1 in cnt)) names[++n] = $1
			c = ++cnt[$1]
			rps[$1, c] = v["rps"]; reqs[$1] += v["requests"]; waits[$1] += v["redis_waits"]; rt[$1] += v["replica_ticks"]
		}
		END {
			printf "%-22s %8s %8s %-28s %10s %11s\n", "min_replicas 1", "req/s", "vs 0", "by round", "WAIT/req", "replica µs"
			for (i = 1; i <= n; i++) {
				w1 = names[i]
				if (w1 !~ /^redis-w1-/) continue
				w0 = w1; sub(/^redis-w1-/, "redis-", w0)
				k = cnt[w1] < cnt[w0] ? cnt[w1] : cnt[w0]
				rounds = ""
				for (j = 1; j <= k; j++) { a[j] = rps[w1, j]; b[j] = rps[w0, j]; r[j] = rps[w1, j] / rps[w0, j]; rounds = rounds sprintf("%s%.2fx", j > 1 ? " " : "", r[j]) }
				m1 = med(a, k); m0 = med(b, k); mr = med(r, k)
				printf "%-22s %8.0f %7.2fx %-28s %10.3f %11.1f\n", w1, m1, m1 / m0, rounds " (med " sprintf("%.2f", mr) ")", waits[w1] / reqs[w1], rt[w1] * 1e6 / hz / reqs[w1]
				printf "%-22s %8.0f %8s %-28s %10.3f %11.1f\n", w0, m0, "", "", waits[w0] / reqs[w0], rt[w0] * 1e6 / hz / reqs[w0]
			}
		}' "$work/results"
fi
