#!/usr/bin/env bash
# walk.sh: the files of hookgate's own code that run for one webhook
# (verify → dedupe → freshness → forward → record) and for one envelope
# (enqueue → lease → attempt → settle), measured, not guessed.
#
# It builds hookgate with coverage counters, runs the gateway twice on the
# same Caddyfile for the same time, once idle and once with the one webhook
# or envelope, and lists the files whose counters the request raised: the
# files a newcomer reads to follow it. Tests, mains and the files of
# start-up alone are left out by construction.
#
# usage: bench/walk.sh [<commit>]   (default: the working tree)
# Run it on two commits to compare; it needs no Redis (the embedded store).
#
# It fails when a walk touches more files than its budget: 16 for one
# webhook, 20 for one envelope, what they touch now (issue 30 asked for 14
# and 12 before its own split of the sender and the queues into files by
# concern added six to the envelope's walk: bench/RESULTS.md says why the
# budgets are these). A change that adds a file to a walk lowers another's
# or says why. WALK_WEBHOOK_BUDGET and WALK_ENVELOPE_BUDGET override them,
# to measure an old commit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
src=$root
if [ $# -gt 0 ]; then
	git worktree add -q --detach "$work/src" "$1"
	trap 'kill $(jobs -p) 2>/dev/null || true; git -C "$root" worktree remove --force "$work/src"; rm -rf "$work"' EXIT
	src=$work/src
fi
(cd "$src" && go build -cover -coverpkg=github.com/hookgate/hookgate/... -o "$work/hg" ./cmd/hookgate)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
secret=whsec_d2Fsay10aGUtd2Fsay1vZi1vbmUtcmVxdWVzdA==
export HOOKGATE_SECRET=$secret

# run <name> <caddyfile> <seconds> [<command while it runs>]
run() {
	local name=$1 conf=$2 secs=$3 cmd=${4:-}
	mkdir -p "$work/$name.cov" "$work/$name.data"
	GOCOVERDIR=$work/$name.cov XDG_DATA_HOME=$work/$name.data HOME=$work \
		"$work/hg" run --config "$conf" --adapter caddyfile >"$work/$name.log" 2>&1 &
	local pid=$!
	for _ in $(seq 100); do curl -fs "http://127.0.0.1:$up/ready" >/dev/null 2>&1 && break; sleep 0.1; done
	local start=$SECONDS
	[ -n "$cmd" ] && eval "$cmd" >"$work/$name.out" 2>&1
	sleep $((secs - (SECONDS - start)))
	kill -TERM $pid 2>/dev/null || { echo "the gateway of $name stopped early:"; tail -20 "$work/$name.log"; exit 1; }
	wait $pid || true
	go tool covdata textfmt -i="$work/$name.cov" -o="$work/$name.txt"
}

webhook_budget=${WALK_WEBHOOK_BUDGET:-16}
envelope_budget=${WALK_ENVELOPE_BUDGET:-20}
over=()

# walk <idle> <busy> <budget>: the files whose blocks ran more often in busy;
# past the budget, the walk is noted in over.
walk() {
	python3 - "$work/$1.txt" "$work/$2.txt" >"$work/$2.walk" <<'PY'
import sys, collections
def load(p):
    c = collections.Counter()
    for line in open(p).read().splitlines()[1:]:
        block, _, n = line.rpartition(" ")
        c[block.rpartition(" ")[0]] += int(n)
    return c
idle, busy = load(sys.argv[1]), load(sys.argv[2])
files = sorted({b.split(":")[0].removeprefix("github.com/hookgate/hookgate/") for b in busy if busy[b] > idle[b]})
for f in files: print("  " + f)
print(f"  ({len(files)} files)")
PY
	cat "$work/$2.walk"
	local n
	n=$(tail -1 "$work/$2.walk" | tr -dc 0-9)
	if [ "$n" -gt "$3" ]; then
		echo "  over budget: $n files, the budget is $3"
		over+=("$2")
	fi
}

up=$(free_port) gw=$(free_port) admin=$(free_port)
cat >"$work/receive.caddyfile" <<CADDY
{
	admin 127.0.0.1:$admin
	hookgate {
		store file $work/store-receive
	}
}
:$up {
	respond /ready 200
	respond 200 {
		body "{\"ok\":true}"
	}
}
:$gw {
	webhook_verify standard {
		secret {env.HOOKGATE_SECRET}
	}
	webhook_dedupe
	webhook_freshness {
		entity     {webhook.json.entity}
		event_time {webhook.json.time}
	}
	reverse_proxy 127.0.0.1:$up
}
CADDY
body='{"id":"evt_walk","entity":"reservation:1","time":"2026-12-01T00:00:00Z"}'
run receive-idle "$work/receive.caddyfile" 3
rm -rf "$work/store-receive"
run receive-busy "$work/receive.caddyfile" 3 "'$work/hg' sign --id evt_walk --send http://127.0.0.1:$gw/ '$body'"
grep -q "^HTTP/1.1 200" "$work/receive-busy.out" || { echo "the webhook was not forwarded:"; cat "$work/receive-busy.out"; exit 1; }
echo "one webhook (verify → dedupe → freshness → forward → record):"
walk receive-idle receive-busy $webhook_budget

cat >"$work/send.caddyfile" <<CADDY
{
	admin 127.0.0.1:$admin
	hookgate {
		store file $work/store-send
		destination walk {
			url    http://127.0.0.1:$up/hook
			secret {env.HOOKGATE_SECRET}
		}
	}
}
:$up {
	respond /ready 200
	respond 200
}
:$gw {
	webhook_enqueue walk
}
CADDY
run send-idle "$work/send.caddyfile" 4
rm -rf "$work/store-send"
run send-busy "$work/send.caddyfile" 4 "curl -fsS -H 'Content-Type: application/json' -d '$body' http://127.0.0.1:$gw/"
grep -q '"state"' "$work/send-busy.out" || { echo "the event was not enqueued:"; cat "$work/send-busy.out"; exit 1; }
echo "one envelope (enqueue → lease → attempt → settle):"
walk send-idle send-busy $envelope_budget
if [ ${#over[@]} -gt 0 ]; then
	echo "over budget: ${over[*]}"
	exit 1
fi
