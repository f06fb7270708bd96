#!/usr/bin/env bash
# Destinations as data at scale (issue 35): N destinations made through
# the API (default 10,000) on the embedded store and on Redis, each run
# of BenchmarkScale (sender/destinations/scale_bench_test.go) measuring,
# per store: the heap per idle destination, the goroutines the idle
# sender holds, the store's writes while idle, one scan of the N, the
# time a change takes to reach another instance, and one event fanned out
# to 1,000 subscribers beside 1,000 single enqueues in the same run. It
# prints each run, then the median of each figure per store.
#
#   bash bench/scale.sh                  # 3 rounds, N=10000
#   ROUNDS=5 N=20000 bash bench/scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
N=${N:-10000}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -c -o "$out.test" ./sender/destinations/
for r in $(seq 1 "$ROUNDS"); do
	echo "round $r"
	(cd sender/destinations && HOOKGATE_SCALE_N=$N "$out.test" -test.run '^$' -test.bench BenchmarkScale -test.benchtime 1x) |
		grep '^BenchmarkScale/' | tee -a "$out"
done
rm -f "$out.test"
echo
echo "medians over $ROUNDS rounds, N=$N:"
awk '{
	store = $1; sub(/^BenchmarkScale\//, "", store); sub(/-[0-9]+$/, "", store)
	for (i = 5; i < NF; i += 2) { key = store " " $(i+1); vals[key] = vals[key] " " $i; keys[key] = 1 }
}
END {
	for (k in keys) {
		n = split(vals[k], a, " "); asort(a)
		printf "%-30s %s\n", k, a[int((n+1)/2)]
	}
}' "$out" | sort
