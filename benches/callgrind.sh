#!/usr/bin/env bash
# Instructions per unit of an interpreter workload, counted by callgrind, which does
# not move with the machine's load as wall time does. Usage:
#   benches/callgrind.sh a|b-memory|b-none|b-sqlite|f   per step (per branch for f): the
#       workload runs N1 and then N2 units in two processes, and the difference divided
#       by the difference in steps leaves out start-up; only what runs inside the
#       runtime's block_on is counted (the runs, not the doubles' answers made ahead).
#   benches/callgrind.sh c-memory|c-sqlite    per pause: runs with confirmations against
#       the same runs without, each counted apart (`count_confirming`, `count_plain`).
#   benches/callgrind.sh d-memory|d-sqlite    per resume of a paused thread to its first
#       node: counted from the resume call (`mark_resume`) to the action it approved
#       (`mark_action`), the mean of 40 resumes.
#   benches/callgrind.sh c1-memory|c10-memory|c1-sqlite|c10-sqlite    the same for (c)'s
#       resume at the 1st or the 10th pause of a run, the mean of 10 runs.
#   benches/callgrind.sh e-memory|e-sqlite    per loop of one long thread: loops 101-200
#       (a run of 200 loops less one of 100) against loops 901-1000.
#   BENCH_BIN=PATH benches/callgrind.sh ...    counts another build of the bench (one
#       kept aside from an older commit) instead of this tree's, for a before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-b-memory}
# BENCH_BIN names another build of the bench (an older commit's, to compare with).
bin=${BENCH_BIN:-}
[ -n "$bin" ] || bin=$(cargo bench --bench interpreter --no-run --message-format=json 2>/dev/null |
  python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "interpreter" and m.get("executable"):
        print(m["executable"])')
# Instructions collected while inside $toggle, running `callgrind $1 $2`.
count() {
  valgrind --tool=callgrind --toggle-collect="$toggle" --callgrind-out-file=/dev/null "$bin" callgrind "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
per() { # total units
  python3 -c "import sys; print(f'{int(sys.argv[1]) // int(sys.argv[2]):,}')" "$1" "$2"
}
toggle='tokio::runtime::runtime::Runtime::block_on*'
case $workload in
  a|b-*|f)
    case $workload in
      a) n1=100; n2=600; unit=10 ;;   # runs of 10 steps
      f) n1=5; n2=25; unit=100 ;;     # runs of 100 parallel branches
      *) n1=2; n2=12; unit=302 ;;     # runs of 302 steps
    esac
    i1=$(count "$workload" $n1)
    i2=$(count "$workload" $n2)
    echo "$workload: $(per $((i2 - i1)) $(((n2 - n1) * unit))) instructions per step (per branch for f)"
    ;;
  c-*)
    runs=6
    toggle='*count_confirming*'; with=$(count "$workload" $runs)
    toggle='*count_plain*'; without=$(count "$workload" $runs)
    echo "$workload: $(per $((with - without)) $((runs * 11))) instructions per pause and resume"
    ;;
  d-*|c1-*|c10-*)
    case $workload in d-*) n=200 ;; *) n=10 ;; esac
    out=$(mktemp -d)
    valgrind --tool=callgrind --zero-before='*mark_resume*' --dump-before='*mark_action*' \
      --callgrind-out-file="$out/cg" "$bin" callgrind "$workload" $n >/dev/null 2>&1
    # Each dump holds what ran since the last zero: one resume to its first node.
    python3 - "$out" "$workload" <<'PY'
import glob, re, sys
totals = []
for f in glob.glob(sys.argv[1] + "/cg.*"):
    m = re.search(r"^(?:summary|totals): (\d+)", open(f).read(), re.M)
    if m and int(m.group(1)) > 0:
        totals.append(int(m.group(1)))
totals.sort()
print(f"{sys.argv[2]}: {sum(totals) // len(totals):,} instructions per resume to the first node "
      f"(mean of {len(totals)}; {totals[0]:,} to {totals[-1]:,})")
PY
    rm -rf "$out"
    ;;
  e-*)
    first=$(( $(count "$workload" 200) - $(count "$workload" 100) ))
    last=$(( $(count "$workload" 1000) - $(count "$workload" 900) ))
    echo "$workload: $(per $first 100) instructions per loop at loops 101-200, $(per $last 100) at loops 901-1000"
    ;;
  *) echo "usage: $0 a|b-memory|b-none|b-sqlite|c-memory|c-sqlite|c1-memory|c10-memory|c1-sqlite|c10-sqlite|d-memory|d-sqlite|e-memory|e-sqlite|f" >&2; exit 2 ;;
esac
