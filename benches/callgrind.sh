#!/usr/bin/env bash
# Instructions per step of an interpreter workload, counted by callgrind: the
# workload runs N1 and then N2 units in two processes, and the difference divided by
# the difference in steps leaves out start-up. Only what runs inside the runtime's
# block_on is counted: the runs themselves, not the doubles' answers made ahead. Usage: benches/callgrind.sh a|b-memory|b-none|b-sqlite|f
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-b-memory}
case $workload in
  a) n1=100; n2=600; per=10 ;;       # runs of 10 steps
  b-*) n1=2; n2=12; per=302 ;;      # runs of 302 steps
  f) n1=5; n2=25; per=100 ;;         # runs of 100 parallel branches
  *) echo "usage: $0 a|b-memory|b-none|b-sqlite|f" >&2; exit 2 ;;
esac
bin=$(cargo bench --bench interpreter --no-run --message-format=json 2>/dev/null |
  python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "interpreter" and m.get("executable"):
        print(m["executable"])')
count() {
  valgrind --tool=callgrind --toggle-collect='tokio::runtime::runtime::Runtime::block_on*' --callgrind-out-file=/dev/null "$bin" callgrind "$workload" "$1" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
i1=$(count $n1)
i2=$(count $n2)
echo "$workload: $(( (i2 - i1) / ((n2 - n1) * per) )) instructions per step (per branch for f)"
