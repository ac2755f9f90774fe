"""Breakdown from the langgraph dev log: run_queue_ms / run_exec_ms / run_completed_in_ms
for the runs of each phase (runs 51..550 = one client, 551..1350 = 8 clients)."""
import re, sys
text = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())
done = [l for l in text.splitlines() if "Background run succeeded" in l]
starts = [l for l in text.splitlines() if "Starting background run" in l]
def col(lines, key):
    return [int(m.group(1)) for l in lines if (m := re.search(key + r"=(\d+)", l))]
def pct(v, p):
    v = sorted(v); return v[round((len(v) - 1) * p)]
print("runs succeeded:", len(done))
import os
ph = os.environ.get("PHASES", "one,eight").split(",")
spans = [("one client", 500)] * ("one" in ph) + [("8 clients", 800)] * ("eight" in ph)
at, cut = 50, []
for name, n in spans:
    cut.append((name, slice(at, at + n))); at += n
for name, sl in cut:
    for key, lines in (("run_queue_ms", starts), ("run_exec_ms", done), ("run_completed_in_ms", done)):
        v = col(lines, key)[sl]
        if v:
            print(f"{name:10s} {key:20s} n={len(v)} p50={pct(v,.5)} p99={pct(v,.99)} mean={sum(v)/len(v):.1f}")
