#!/usr/bin/env bash
# Memory of `hookgate deliveries export`: a delivery history of N entries
# (seeded into the embedded store by bench/histseed before the gateway
# starts) is exported as JSON Lines through the admin API, page by page.
# Read: the gateway's peak resident memory (VmHWM) before and after the
# export, and the export command's own peak (/usr/bin/time -f %M), for
# each N: constant memory means they do not grow with N.
#
#   bash bench/history_export.sh          # SIZES="10000 100000"
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-"10000 100000"}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
status() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; } # KiB

go build -o "$work/hookgate" ./cmd/hookgate
go build -o "$work/histseed" ./bench/histseed

for n in $SIZES; do
	data="$work/data-$n"
	"$work/histseed" -db "$data/caddy/hookgate/state.db" -n "$n"
	port=$(free_port); admin=$(free_port)
	cat > "$work/Caddyfile" <<CONF
{
	admin 127.0.0.1:$admin
	persist_config off
	hookgate {
		destination enrollment {
			url http://127.0.0.1:1
			secret whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA==
		}
	}
}
http://127.0.0.1:$port {
	webhook_enqueue enrollment
}
CONF
	XDG_DATA_HOME="$data" "$work/hookgate" run --config "$work/Caddyfile" --adapter caddyfile > "$work/gateway.log" 2>&1 &
	gw=$!; pids+=($gw)
	until curl -s -o /dev/null "127.0.0.1:$port"; do sleep 0.1; done
	sleep 1
	hwm_before=$(status "$gw" VmHWM)
	start=$(date +%s.%N)
	/usr/bin/time -f %M -o "$work/cli.kib" "$work/hookgate" deliveries export --address "127.0.0.1:$admin" > "$work/export.jsonl"
	secs=$(echo "$(date +%s.%N) - $start" | bc)
	lines=$(wc -l < "$work/export.jsonl")
	hwm_after=$(status "$gw" VmHWM)
	printf '%7d entries: %7d lines, %4.1f s, %5.1f MiB of JSON Lines, state.db %d MiB; gateway peak RSS %d MiB before, %d MiB after (now %d MiB anonymous, %d MiB of the mapped file); export command peak RSS %d MiB\n' \
		"$n" "$lines" "$secs" "$(echo "$(stat -c %s "$work/export.jsonl") / 1048576" | bc -l)" $(($(stat -c %s "$data/caddy/hookgate/state.db") / 1048576)) \
		$((hwm_before / 1024)) $((hwm_after / 1024)) $(($(status "$gw" RssAnon) / 1024)) $(($(status "$gw" RssFile) / 1024)) $(($(cat "$work/cli.kib") / 1024))
	kill "$gw"; wait "$gw" 2>/dev/null || true
done
