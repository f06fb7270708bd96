#!/usr/bin/env bash
# Resident memory of a gateway listing its dead letters: 200 dead letters
# of 1 MiB each (the receiver answers 400), then the gateway's VmRSS is
# read before and after a one-entry list, the summary, a dry-run redrive of
# all and one envelope shown, on the embedded store and on Redis. The
# contract: listing one dead letter grows resident memory by under 32 MiB
# (reading every payload would be 200 MiB and more).
#
#   bash bench/dlq_rss.sh            # N=200 letters of SIZE=1048576 bytes
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200}
SIZE=${SIZE:-1048576}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; } # KiB

go build -o "$work/hookgate" ./cmd/hookgate
go build -o "$work/sendbench" ./bench/sendbench
rcv_port=$(free_port)
"$work/sendbench" receiver -addr "127.0.0.1:$rcv_port" -status 400 & pids+=($!)
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" & pids+=($!)
head -c "$SIZE" /dev/zero | tr '\0' a | sed 's/^/{"pad":"/; s/$/"}/' > "$work/big.json"
sleep 0.5

for store in "store file $work/data" "store redis redis://127.0.0.1:$redis_port/0"; do
	port=$(free_port); admin=$(free_port)
	cat > "$work/Caddyfile" <<EOF
{
	admin 127.0.0.1:$admin
	persist_config off
	hookgate {
		$store
		sender {
			attempts 1
		}
		destination enrollment {
			url http://127.0.0.1:$rcv_port
			secret whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA==
		}
	}
}
http://127.0.0.1:$port {
	webhook_enqueue enrollment {
		max_body 2MiB
	}
}
EOF
	XDG_DATA_HOME="$work" "$work/hookgate" run --config "$work/Caddyfile" --adapter caddyfile > "$work/gateway.log" 2>&1 &
	gw=$!; pids+=($gw)
	until curl -s -o /dev/null "127.0.0.1:$port"; do sleep 0.1; done
	for i in $(seq "$N"); do
		curl -s -o /dev/null -H "Idempotency-Key: big-$i" --data-binary @"$work/big.json" "127.0.0.1:$port"
	done
	until curl -s "127.0.0.1:$admin/hookgate/dlq/summary" | grep -q "\"total\":$N"; do sleep 0.2; done
	sleep 1
	before=$(rss "$gw")
	curl -s -o /dev/null "127.0.0.1:$admin/hookgate/dlq?limit=1"
	after_list=$(rss "$gw")
	curl -s -o /dev/null "127.0.0.1:$admin/hookgate/dlq/summary"
	curl -s -o /dev/null -X POST -d "{\"limit\":$N,\"dry_run\":true}" "127.0.0.1:$admin/hookgate/dlq/redrive"
	after_scans=$(rss "$gw")
	curl -s -o /dev/null "127.0.0.1:$admin/hookgate/dlq/big-1"
	after_show=$(rss "$gw")
	printf '%-6s %d dead letters of %d bytes: RSS %d MiB; +%d MiB after a one-entry list, +%d MiB after summary and a dry-run redrive, +%d MiB after showing one\n' \
		"${store%% *}${store:6:5}" "$N" "$SIZE" $((before / 1024)) $(((after_list - before) / 1024)) $(((after_scans - before) / 1024)) $(((after_show - before) / 1024))
	kill "$gw"; wait "$gw" 2>/dev/null || true
done
