"""benches/graphs/agent_loop.toml in LangGraph, for `cargo bench --bench watch`.

The same nodes, routes and state: each loop observes the page (a ~2 KB object of 16
elements, parsed from the tool's JSON text as an MCP reply is), plans one action (the
prompt rendered, the planner's ~100 B answer parsed), checks it, passes the policy gate,
acts and appends a message and a step. No checkpointer, as `switchyard run --store
none`. Prints the seconds `invoke` took for LOOPS loops (6 * LOOPS + 2 steps).
"""

import json
import operator
import sys
import time
from typing import Annotated, Optional, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

PAGE = json.dumps(
    {
        "url": "https://library.example.org/visit",
        "title": "Visit the City Library",
        "elements": [
            {
                "ref": f"e{i}",
                "role": "link" if i % 3 == 0 else "button",
                "name": f"Element number {i} of the library page",
                "enabled": True,
            }
            for i in range(16)
        ],
    }
)
PLAN = json.dumps(
    {"id": "e42", "kind": "click", "target": "Opening hours link", "reason": "the page lists them"}
)


class State(TypedDict, total=False):
    goal: str
    loops: int
    confirm_every: int
    messages: Annotated[list, add_messages]
    steps: Annotated[list, operator.add]
    tool_steps: int
    last_observation: Optional[dict]
    planned_action: Optional[dict]
    verdict: Optional[dict]
    action_error: Optional[str]
    loops_left: int
    outcome: str
    response: str


def ingest(s):
    return {"messages": [{"role": "user", "content": s["goal"]}]}


def observe(s):
    return {"last_observation": json.loads(PAGE)}


def plan(s):
    o = s["last_observation"]
    prompt = (
        f"Goal: {s['goal']}\nActions so far: {s.get('tool_steps', 0)}\n"
        f"Page: {o['title']} ({o['url']}), {len(o['elements'])} elements."
    )
    assert prompt
    return {"planned_action": json.loads(PLAN)}


def validate(s):
    kind = s["planned_action"]["kind"]
    return {"action_error": None if kind in ("click", "type", "navigate") else f"cannot {kind}"}


def policy_gate(s):
    a = s["planned_action"]
    every = s.get("confirm_every", 0)
    if "pay" in a["target"]:
        return {"verdict": {"decision": "deny", "rule": "no_payments", "reason": "payments are off limits"}}
    if every > 0 and s.get("tool_steps", 0) % every == every - 1:
        return {"verdict": {"decision": "confirm", "rule": "confirm", "reason": f"{a['kind']} {a['target']}?"}}
    return {"verdict": {"decision": "allow", "rule": None, "reason": None}}


def execute(s):
    a = s["planned_action"]
    n = s.get("tool_steps", 0) + 1
    return {
        "tool_steps": n,
        "steps": [f"{a['kind']}:{a['id']}"],
        "messages": [
            {"role": "assistant", "content": f"I {a['kind']} on {a['target']} because {a['reason']}"}
        ],
    }


def stop_or_continue(s):
    return {"loops_left": s["loops"] - s.get("tool_steps", 0)}


def finalize_done(s):
    return {"outcome": "done", "response": f"done after {s['tool_steps']} tool steps"}


def finalize_denied(s):
    return {"outcome": "denied", "response": s["verdict"]["reason"]}


def finalize_invalid(s):
    return {"outcome": "invalid", "response": s["action_error"]}


g = StateGraph(State)
for f in (ingest, observe, plan, validate, policy_gate, execute, stop_or_continue,
          finalize_done, finalize_denied, finalize_invalid):
    g.add_node(f.__name__, f)
g.add_edge(START, "ingest")
g.add_edge("ingest", "observe")
g.add_edge("observe", "plan")
g.add_edge("plan", "validate")
g.add_conditional_edges(
    "validate", lambda s: "finalize_invalid" if s["action_error"] else "policy_gate"
)
g.add_conditional_edges(
    "policy_gate",
    lambda s: {"allow": "execute", "deny": "finalize_denied"}[s["verdict"]["decision"]],
)
g.add_edge("execute", "stop_or_continue")
g.add_conditional_edges(
    "stop_or_continue",
    lambda s: "finalize_done" if s["tool_steps"] >= s["loops"] else "observe",
)
for f in ("finalize_done", "finalize_denied", "finalize_invalid"):
    g.add_edge(f, END)
graph = g.compile()

loops = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
start = time.perf_counter()
out = graph.invoke(
    {
        "goal": "Find the opening hours of the city library and write them down",
        "loops": loops,
        "confirm_every": 0,
        "tool_steps": 0,
    },
    {"recursion_limit": 6 * loops + 10},
)
took = time.perf_counter() - start
assert out["tool_steps"] == loops, out["tool_steps"]
assert len(out["messages"]) == loops + 1
print(took)
