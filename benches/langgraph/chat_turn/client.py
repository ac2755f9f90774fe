"""Chat-turn client for `langgraph dev` (protocol of benches/chat_turn.rs).
Usage: client.py BASE_URL SERVER_PID MODEL_PID [ASSISTANT_ID]"""
import asyncio, json, os, sys, time

import httpx

BASE, SERVER_PID, MODEL_PID = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ASSISTANT = sys.argv[4] if len(sys.argv) > 4 else "talk"
TICK = 1.0 / os.sysconf("SC_CLK_TCK")


def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rfind(")") + 2:].split()


def tree(pid):
    """pid and all its live descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            pass
    return out


def tree_cpu(pid):
    """utime+stime of pid and its live descendants, plus the root's reaped children (cutime+cstime), seconds."""
    ticks, pids = 0, tree(pid)
    for p in pids:
        try:
            f = stat(p)
        except FileNotFoundError:
            continue
        ticks += int(f[11]) + int(f[12])
    f = stat(pid)
    ticks += int(f[13]) + int(f[14])
    return ticks * TICK, pids


def machine_busy():
    """Machine-wide busy CPU seconds (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v[:8]) - idle) * TICK


def own_cpu():
    t = os.times()
    return t.user + t.system


def model_cpu():
    f = stat(MODEL_PID)
    return (int(f[11]) + int(f[12])) * TICK


class Meter:
    def __init__(self):
        self.s = tree_cpu(SERVER_PID)[0]; self.m = model_cpu(); self.c = own_cpu()
        self.b = machine_busy(); self.t = time.perf_counter()

    def done(self, n):
        s, pids = tree_cpu(SERVER_PID)
        el = time.perf_counter() - self.t
        r = dict(turns=n, seconds=el, turns_per_s=n / el,
                 server_cpu_per_turn_us=(s - self.s) / n * 1e6,
                 server_cpu_s=s - self.s, server_pids=pids,
                 model_cpu_per_turn_us=(model_cpu() - self.m) / n * 1e6,
                 client_cpu_per_turn_us=(own_cpu() - self.c) / n * 1e6,
                 machine_busy_per_turn_us=(machine_busy() - self.b) / n * 1e6,
                 machine_busy_cores=(machine_busy() - self.b) / el)
        r["others_cpu_per_turn_us"] = (r["machine_busy_per_turn_us"] - r["server_cpu_per_turn_us"]
                                        - r["model_cpu_per_turn_us"] - r["client_cpu_per_turn_us"])
        return r


async def new_thread(c):
    r = await c.post(f"{BASE}/threads", json={})
    r.raise_for_status()
    return r.json()["thread_id"]


async def turn(c, thread, text):
    body = {"assistant_id": ASSISTANT,
            "input": {"messages": [{"type": "human", "content": text}]},
            "stream_mode": ["messages-tuple", "values"]}
    t = time.perf_counter()
    first = None
    pending = b""
    async with c.stream("POST", f"{BASE}/threads/{thread}/runs/stream", json=body) as r:
        assert r.status_code == 200, r.status_code
        async for chunk in r.aiter_raw():
            if first is not None:
                continue
            pending += chunk.replace(b"\r\n", b"\n")
            while (end := pending.find(b"\n\n")) >= 0:
                event, pending = pending[:end], pending[end + 2:]
                lines = event.split(b"\n")
                name = next((l[7:] for l in lines if l.startswith(b"event: ")), b"")
                data = next((l[6:] for l in lines if l.startswith(b"data: ")), None)
                if name == b"messages" and data is not None:
                    content = json.loads(data)[0].get("content")
                    if isinstance(content, str) and content:
                        first = time.perf_counter() - t
                        break
                if name == b"error":
                    raise RuntimeError(data)
    whole = time.perf_counter() - t
    assert first is not None, "no text streamed"
    return first, whole


def pct(v, p):
    v = sorted(v)
    return v[round((len(v) - 1) * p)]


async def main():
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=120, limits=limits) as c:
        # sanity: the reply ends up in the thread state
        warm = await new_thread(c)
        for i in range(50):
            await turn(c, warm, f"Warming up {i}")
        st = (await c.get(f"{BASE}/threads/{warm}/state")).json()
        msgs = st["values"]["messages"]
        print(f"warm thread: {len(msgs)} messages; last AI: {msgs[-1]['type']} {msgs[-1]['content'][:40]!r}...{msgs[-1]['content'][-20:]!r}", flush=True)

        # the server's CPU when idle (its queue polls every 0.5 s), 20 s
        m = Meter()
        await asyncio.sleep(20)
        idle = m.done(1)
        print("IDLE", json.dumps({"seconds": idle["seconds"], "server_cpu_s": idle["server_cpu_s"],
                                  "server_cpu_per_s_us": idle["server_cpu_s"] / idle["seconds"] * 1e6}), flush=True)

        PHASES = os.environ.get("PHASES", "one,eight").split(",")
        # one client, 20 conversations x 25 turns
        if "one" in PHASES:
            firsts, wholes = [], []
            m = Meter()
            for n in range(20):
                th = await new_thread(c)
                for i in range(25):
                    f, w = await turn(c, th, f"Question {i}?")
                    firsts.append(f); wholes.append(w)
            r1 = m.done(500)
            r1.update(ttft_p50_us=pct(firsts, .5) * 1e6, ttft_p99_us=pct(firsts, .99) * 1e6,
                      whole_p50_us=pct(wholes, .5) * 1e6, whole_p99_us=pct(wholes, .99) * 1e6,
                      ttft_mean_us=sum(firsts) / 500 * 1e6, whole_mean_us=sum(wholes) / 500 * 1e6)
            print("ONE", json.dumps(r1), flush=True)

        # 8 clients at once, 100 turns each, new thread every 25 turns
        if "eight" in PHASES:
            wholes8 = []

            async def one(k):
                th = None
                for i in range(100):
                    if i % 25 == 0:
                        th = await new_thread(c)
                    f, w = await turn(c, th, f"Question {i}?")
                    wholes8.append(w)

            m = Meter()
            await asyncio.gather(*(one(k) for k in range(8)))
            r8 = m.done(800)
            r8.update(whole_p50_us=pct(wholes8, .5) * 1e6, whole_p99_us=pct(wholes8, .99) * 1e6)
            print("EIGHT", json.dumps(r8), flush=True)


if __name__ == "__main__":
    import uvloop
    uvloop.install()
    asyncio.run(main())
