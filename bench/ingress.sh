#!/usr/bin/env bash
# Durable ingress, the provider's view (issue 31): a provider-like load
# generator sends GitHub-signed pushes (X-Hub-Signature-256, a unique
# X-GitHub-Delivery, X-GitHub-Event: push, a 1 KiB JSON body unique to each
# delivery) to three gateways side by side on loopback:
#
# - plain:    Caddy `reverse_proxy` to a healthy upstream (the baseline; the
#             upstream bench/run.sh uses);
# - redis:    `webhook_verify github` + `webhook_enqueue svc` on Redis,
#             keeping X-GitHub-Event, X-GitHub-Delivery and X-GitHub-Hook-ID,
#             the delivery ID the default (webhook_verify's dedupe key);
# - embedded: the same on the embedded default store (bbolt, fsync on).
#
# The destination `svc` points at a port where nothing listens, for the
# whole run: the service is down. The sender runs its defaults, so after 5
# refused connections the destination's breaker opens and nothing more is
# leased but one trial every 30 s: the production case of a service that
# is down, and cheap. Each round runs every configuration once at each
# concurrency (interleaved, so drift touches all alike). It prints each
# run's line, then per concurrency the median accept rate (2xx answers/s),
# p50 and p99, the ratio of each median rate to plain reverse_proxy's, and
# the ratio round by round. After each hookgate run, the envelopes the
# store holds (the admin API's depth, every state) must have grown by the
# run's 2xx answers: an accept means stored. Any non-2xx answer, or a
# mismatch, makes the script exit 1 after the summary.
#
# Then, unless MEM_N=0, Redis memory per envelope: MEM_N envelopes
# enqueued through a gateway on a fresh Redis with the destination paused
# (nothing attempted), `INFO memory` `used_memory` read before and after
# (and the same less the clients' buffers), without keep_headers and with
# the three kept headers, which must be in what Redis holds. Two pairs:
# payloads of MEM_SIZE bytes (bench/sender.sh's 500), then spread over
# MEM_SIZE to MEM_SIZE+MEM_SPREAD-1 bytes, so that the allocator's size
# classes average out. It prints each pair and how many bytes the headers
# add beyond their own size (issue 31's target: at most 32).
#
#   bash bench/ingress.sh                              # 3 rounds of 10s runs, 32 and 128 clients; 20,000 envelopes for memory
#   ROUNDS=3 DURATION=5s CONCS="32 128" bash bench/ingress.sh  # the RESULTS.md run (~3 minutes)
#   ROUNDS=2 DURATION=5s CONCS=32 MEM_N=0 bash bench/ingress.sh  # a quick look at the rates only
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONCS=${CONCS:-32 128}
MEM_N=${MEM_N:-20000}
MEM_SIZE=${MEM_SIZE:-500}
MEM_SPREAD=${MEM_SPREAD:-256}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

go build -o "$work/hookgate" ./cmd/hookgate
go build -o "$work/loadgen" ./bench/loadgen

up_port=$(free_port)
redis_port=$(free_port)
"$work/loadgen" upstream -addr "127.0.0.1:$up_port" & pids+=($!)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" & pids+=($!)
redis_pid=$!
# The service behind the gateways: a port nothing listens on, checked
# before the first run and after the last.
dead_port=$(free_port)
dead_url="http://127.0.0.1:$dead_port/hooks"
sleep 0.5

gh_secret=bench-github-secret
dest_secret=whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA==
kept="X-GitHub-Event X-GitHub-Delivery X-GitHub-Hook-ID"

# enqueue_block is the receiver chain's enqueue: the delivery ID is the
# default (the key webhook_dedupe would use behind webhook_verify github),
# and with keep 1 the headers the service needs are kept.
enqueue_block() { # keep: 1 to keep headers
	if [ "$1" = 1 ]; then
		echo "webhook_enqueue svc {
		keep_headers $kept
	}"
	else
		echo "webhook_enqueue svc"
	fi
}

run_gateway() { # name, hookgate global option, handlers
	local name=$1 global=$2 handlers=$3 port admin
	port=$(free_port)
	admin=$(free_port)
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
}
CADDY
	XDG_DATA_HOME="$work/data-$name" "$work/hookgate" run --config "$work/$name.Caddyfile" > "$work/$name.log" 2>&1 &
	gw_pid=$!
	pids+=($gw_pid)
	for _ in $(seq 100); do curl -fs "http://127.0.0.1:$admin/config/" >/dev/null 2>&1 && break; sleep 0.1; done
	curl -fs "http://127.0.0.1:$admin/config/" >/dev/null || { cat "$work/$name.log"; exit 1; }
	gw_url="http://127.0.0.1:$port/"
	gw_admin=$admin
	admin_of[$gw_url]=$admin
	pid_of[$gw_url]=$gw_pid
}
declare -A admin_of pid_of

hookgate_app() { # store line ("" for the embedded default)
	echo "hookgate {
		$1
		destination svc {
			url $dead_url
			secret $dest_secret
		}
	}"
}

# stored reads the envelopes the gateway's store holds for svc: every
# state of the admin API's depth (queued, leased, paused, dead, corrupt).
stored() { # admin port
	curl -fs "http://127.0.0.1:$1/hookgate/destinations" | python3 -c '
import json, sys
for d in json.load(sys.stdin)["destinations"]:
    if d["name"] == "svc":
        print(sum(d["depth"].values()))'
}

# CPU time of a process (clock ticks, user + system), and of the machine
# (busy and total ticks, every process's, the load generator's too).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
machine() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }

# bench runs loadgen against gw_url and appends its line to the results,
# with the envelopes stored during the run (hookgate only), and the CPU
# per request of the gateway and of redis-server, and how busy the
# machine was.
bench() { # label
	local admin=${admin_of[$gw_url]} before=- after=- cpu0 cpu1 line
	if [ "$1" != plain ]; then before=$(stored "$admin"); fi
	cpu0="$(ticks "${pid_of[$gw_url]}") $(ticks "$redis_pid") $(machine)"
	line=$("$work/loadgen" -url "$gw_url" -scheme github -secret "$gh_secret" -c "$conc" -d "$DURATION" -label "$1@$conc")
	cpu1="$(ticks "${pid_of[$gw_url]}") $(ticks "$redis_pid") $(machine)"
	if [ "$1" != plain ]; then after=$(stored "$admin"); fi
	echo "$line $(echo "$before $after" | awk '{printf "stored=%s", ($1 == "-") ? "-" : $2 - $1}')" \
		"$(echo "$cpu0 $cpu1" | awk -v hz="$(getconf CLK_TCK)" -v line="$line" '{
			match(line, /requests=[0-9]+/); n = substr(line, RSTART + 9, RLENGTH - 9) + 0; if (n == 0) n = 1
			us = 1e6 / hz / n
			printf "gw_us=%.0f redis_us=%.0f busy_pct=%.0f", ($5 - $1) * us, ($6 - $2) * us, 100 * ($7 - $3) / ($8 - $4)
		}')" | tee -a "$work/results"
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, $CONCS clients, $DURATION per run, 1 KiB GitHub pushes, $ROUNDS rounds (interleaved; medians below)"

run_gateway plain "" "reverse_proxy 127.0.0.1:$up_port"
plain_url=$gw_url
run_gateway redis "$(hookgate_app "store redis redis://127.0.0.1:$redis_port")" "webhook_verify github {
		secret $gh_secret
	}
	$(enqueue_block 1)"
redis_url=$gw_url
run_gateway embedded "$(hookgate_app "")" "webhook_verify github {
		secret $gh_secret
	}
	$(enqueue_block 1)"
embedded_url=$gw_url

if curl -s -o /dev/null "$dead_url"; then
	echo "something listens on $dead_url: the service must be down" >&2
	exit 1
fi

for round in $(seq "$ROUNDS"); do
	for conc in $CONCS; do
		gw_url=$plain_url; bench plain
		gw_url=$redis_url; bench redis
		gw_url=$embedded_url; bench embedded
	done
done

if curl -s -o /dev/null "$dead_url"; then
	echo "something listened on $dead_url by the end: the service was not down throughout" >&2
	exit 1
fi
for url in "$redis_url" "$embedded_url"; do
	curl -fs "http://127.0.0.1:${admin_of[$url]}/hookgate/destinations" | python3 -c '
import json, sys
d = [d for d in json.load(sys.stdin)["destinations"] if d["name"] == "svc"][0]
print(sys.argv[1] + ": svc breaker " + d["breaker"] + ", depth " + json.dumps(d["depth"]))' "$url"
done

echo
status=0
python3 - "$work/results" <<'PY' || status=1
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(x.split("=", 1) for x in f[1:])
    runs.setdefault(f[0], []).append(kv)
bad = 0
# The accept rate: 2xx answers per second.
def rate(r):
    return float(r["rps"]) * (int(r["requests"]) - int(r["non2xx"])) / int(r["requests"])
print(f"{'run':16} {'2xx/s':>7} {'range':>13} {'plain':>6} {'p50 ms':>7} {'p99 ms':>7} {'non2xx':>6} {'errors':>6} {'2xx':>7} {'stored':>7} {'gw µs':>6} {'rds µs':>6} {'busy':>5}")
for name, rs in runs.items():
    conc = name.split("@")[1]
    base = statistics.median(rate(r) for r in runs["plain@" + conc])
    rates = [rate(r) for r in rs]
    med = statistics.median(rates)
    non2xx = sum(int(r["non2xx"]) for r in rs)
    errors = sum(int(r["errors"]) for r in rs)
    accepted = sum(int(r["requests"]) - int(r["non2xx"]) for r in rs)
    stored = "-"
    if rs[0]["stored"] != "-":
        stored = sum(int(r["stored"]) for r in rs)
        bad += sum(int(r["stored"]) != int(r["requests"]) - int(r["non2xx"]) for r in rs)
    bad += non2xx + errors
    m = lambda k: statistics.median(float(r[k]) for r in rs)
    print(f"{name:16} {med:7.0f} {min(rates):6.0f}-{max(rates):<6.0f} {med / base:5.2f}x {m('p50_ms'):7.2f} {m('p99_ms'):7.2f} {non2xx:6d} {errors:6d} {accepted:7d} {stored:>7} {m('gw_us'):6.0f} {m('redis_us'):6.0f} {m('busy_pct'):4.0f}%")
# Each round's ratio: the two runs of a pair ran seconds apart.
for name, rs in runs.items():
    if name.startswith("plain@"):
        continue
    base = runs["plain@" + name.split("@")[1]]
    per = [rate(r) / rate(b) for r, b in zip(rs, base)]
    print(f"{name} / plain by round: " + ", ".join(f"{x:.2f}x" for x in per))
if bad:
    print(f"FAILED: {bad} non-2xx answers, transport errors, or runs whose stored envelopes differ from their 2xx answers")
    sys.exit(1)
PY
# What the gateways logged at ERROR (a 503 store_unavailable logs why).
for name in redis embedded; do
	n=$(grep -c '"level":"error"' "$work/$name.log" || true)
	if [ "$n" -gt 0 ]; then
		echo "$name logged $n errors; the first: $(grep -m1 '"level":"error"' "$work/$name.log" | cut -c1-400)"
	fi
done

# Redis memory per envelope, with and without kept headers, each on a
# fresh redis-server, the destination paused so that no attempt (and no
# attempt log) is written.

# memory prints INFO memory's used_memory (what bench/sender.sh's figure
# reads), and the same less the clients' buffers (mem_clients_normal): the
# gateway's connections, as many as its pool opened, and not the
# envelopes'.
memory() { # port
	redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '
		/^used_memory:/ {u = $2}
		/^mem_clients_normal:/ {c = $2}
		END {print u, u - c}'
}
mem_run() { # label, keep (0 or 1), spread
	local port rpid before after n line key id
	port=$(free_port)
	redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis-mem.log" & pids+=($!)
	rpid=$!
	sleep 0.3
	run_gateway "mem$2" "$(hookgate_app "store redis redis://127.0.0.1:$port")" "webhook_verify github {
		secret $gh_secret
	}
	$(enqueue_block "$2")"
	curl -fs -X POST -o /dev/null "http://127.0.0.1:$gw_admin/hookgate/destinations/svc/pause"
	before=$(memory "$port")
	line=$("$work/loadgen" -url "$gw_url" -scheme github -secret "$gh_secret" -size "$MEM_SIZE" -spread "$3" -c 16 -d 10m -n "$MEM_N" -label "mem-$1")
	# Redis finishes a rehash of its key table in the background (the old
	# table counts until then).
	sleep 1
	after=$(memory "$port")
	n=$(stored "$gw_admin")
	echo "$line stored=$n" >&2
	if [ "$n" != "$MEM_N" ]; then
		echo "memory run $1: $n envelopes stored, not $MEM_N" >&2
		exit 1
	fi
	# One envelope, to see its ID (the default) and, with keep, that the
	# headers are in what Redis holds.
	key=$(redis-cli -p "$port" --scan --pattern '*:q:{svc}:body' | head -1)
	id=$(redis-cli -p "$port" hrandfield "$key")
	if [ "$2" = 1 ] && ! redis-cli -p "$port" hget "$key" "$id" | grep -aqi 'X-GitHub-Hook-ID'; then
		echo "memory run $1: envelope $id holds no X-GitHub-Hook-ID" >&2
		exit 1
	fi
	echo "$1: an envelope's ID is $id (${#id} bytes)" >&2
	echo "$n $before $after" | awk '{printf "%.0f %.0f\n", ($4 - $2) / $1, ($5 - $3) / $1}' >> "$work/mem"
	kill "$gw_pid" "$rpid"
	wait "$gw_pid" "$rpid" 2>/dev/null || true
}

if [ "$MEM_N" -gt 0 ]; then
	echo
	# The kept headers' own size: each name and value, as loadgen sends them.
	own=$(for h in $kept; do
		case $h in
		X-GitHub-Event) echo "$h push" ;;
		X-GitHub-Delivery) echo "$h 00000000-0000-0000-0000-000000000000" ;;
		X-GitHub-Hook-ID) echo "$h 512345678" ;;
		esac
	done | awk '{n += length($1) + length($2)} END {print n}')
	printf '%-16s %22s %22s %14s %8s %7s\n' payload "without keep_headers" "with 3 kept headers" added "own size" beyond
	# Payloads of one size, then sizes spread over the allocator's size
	# classes (the headers may fit in what rounding left free, or cross
	# into the next class: only the spread shows the average).
	for spread in 1 "$MEM_SPREAD"; do
		: > "$work/mem"
		mem_run without 0 "$spread"
		mem_run with 1 "$spread"
		label="$MEM_SIZE bytes"
		if [ "$spread" -gt 1 ]; then label="$MEM_SIZE-$((MEM_SIZE + spread - 1)) bytes"; fi
		tr '\n' ' ' < "$work/mem" | awk -v own="$own" -v label="$label" '{
			printf "%-16s %22s %22s %14s %8d %7s\n", label, $1 " (" $2 ")", $3 " (" $4 ")", ($3 - $1) " (" ($4 - $2) ")", own, sprintf("%+d", $4 - $2 - own)
		}'
	done
	echo "bytes per envelope over $MEM_N envelopes: INFO memory used_memory's growth (in parentheses, less the clients' buffers); target: beyond at most +32"
fi
exit "$status"
