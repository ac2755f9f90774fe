# LangGraph's official Python client (langgraph-sdk from PyPI), unmodified, against
# `switchyard serve` at $API_URL. Prints one JSON line per step; the Rust test
# compares them.
import json
import os
import time

from langgraph_sdk import get_sync_client

client = get_sync_client(url=os.environ["API_URL"], api_key=os.environ.get("API_KEY"))


def out(step, value):
    print(json.dumps({"step": step, "value": value}), flush=True)


def error(fn):
    try:
        fn()
        return "no error"
    except Exception as e:  # the SDK raises httpx errors with the server's detail
        return f"{type(e).__name__}: {getattr(e, 'response', None) and e.response.status_code}"


thread = client.threads.create(thread_id="py-chat", metadata={"user": "bo"})
out("threads.create", {"thread_id": thread["thread_id"], "status": thread["status"]})

parts = list(
    client.runs.stream(
        thread["thread_id"],
        "chat",
        input={"question": "What is 2 + 2?"},
        stream_mode=["values", "updates", "messages-tuple"],
    )
)
out("runs.stream events", [p.event for p in parts])
chunks = [p.data[0]["content"] for p in parts if p.event == "messages" and p.data[0]["type"] == "AIMessageChunk"]
out("messages-tuple text", "".join(chunks))
last = [p.data for p in parts if p.event == "values"][-1]
out("interrupt in values", last["__interrupt__"])

state = client.threads.get_state(thread["thread_id"])
out("threads.get_state", {"next": state["next"], "interrupts": [i for t in state["tasks"] for i in t["interrupts"]]})

out(
    "resume with a wrong answer",
    error(lambda: client.runs.wait(thread["thread_id"], "chat", command={"resume": {"confirmed": "yes"}})),
)

done = client.runs.wait(thread["thread_id"], "chat", command={"resume": {"confirmed": True}})
out("runs.wait resumed", {"decision": done["decision"], "draft": done["draft"]})

update = client.threads.update_state(thread["thread_id"], {"question": "What is 3 + 3?"})
out("threads.update_state", update["checkpoint"]["checkpoint_id"])
history = client.threads.get_history(thread["thread_id"], limit=2)
out("threads.get_history", [[h["checkpoint"]["checkpoint_id"], h["metadata"]["source"], h["next"]] for h in history])

spin = client.threads.create(thread_id="py-spin")
run = client.runs.create(spin["thread_id"], "spin", input={"label": "py"})
while client.runs.get(spin["thread_id"], run["run_id"])["status"] != "running":
    time.sleep(0.02)
out(
    "a concurrent run (reject)",
    error(lambda: client.runs.create(spin["thread_id"], "spin", input={"label": "x"}, multitask_strategy="reject")),
)
client.runs.cancel(spin["thread_id"], run["run_id"], wait=True)
out("runs.cancel", client.runs.get(spin["thread_id"], run["run_id"])["status"])
out("runs.list", [r["status"] for r in client.runs.list(spin["thread_id"])])
joined = [p.event for p in client.runs.join_stream(thread["thread_id"], run_id=[r for r in client.runs.list(thread["thread_id"])][-1]["run_id"], last_event_id="-1")]
out("runs.join_stream from the start", joined)
out("threads.search", [t["thread_id"] for t in client.threads.search(metadata={"user": "bo"})])
out("assistants.search", [a["graph_id"] for a in client.assistants.search()])

# Assistants: a graph bound to values of its constants, in versions.
made = client.assistants.create("greet", context={"GREETING": "Hi"}, metadata={"by": "py"}, name="py-greeter")
out("assistants.create", {k: made[k] for k in ("graph_id", "name", "config", "context", "metadata", "version")})
out("assistants.get_schemas context", client.assistants.get_schemas(made["assistant_id"])["context_schema"]["properties"])
out("runs.wait on it", client.runs.wait(None, made["assistant_id"], input={"question": "q"}, context={"MAX_STEPS": 2})["answer"])
changed = client.assistants.update(made["assistant_id"], context={"GREETING": "Yo"}, metadata={"more": 1})
out("assistants.update", {k: changed[k] for k in ("context", "metadata", "version")})
out("assistants.get_versions", [v["version"] for v in client.assistants.get_versions(made["assistant_id"])])
out("assistants.set_latest", client.assistants.set_latest(made["assistant_id"], 1)["context"])
out("assistants.count", client.assistants.count(graph_id="greet"))
out("assistants.create with a wrong value", error(lambda: client.assistants.create("greet", context={"MAX_STEPS": "many"})))
out("runs.wait with a wrong value", error(lambda: client.runs.wait(None, made["assistant_id"], input={"question": "q"}, context={"GREETING": 1})))
out("assistants.set_latest to no version", error(lambda: client.assistants.set_latest(made["assistant_id"], 9)))
client.assistants.delete(made["assistant_id"], delete_threads=True)
out("assistants.delete then get", error(lambda: client.assistants.get(made["assistant_id"])))

# The store: memory shared across threads.
client.store.put_item(["users", "py"], "prefs", {"theme": "dark", "n": 3})
client.store.put_item(["users", "py", "notes"], "first", {"text": "hi"}, ttl=5)
item = client.store.get_item(["users", "py"], "prefs")
out("store.get_item", {k: item[k] for k in ("namespace", "key", "value")})
out("store.get_item missing", client.store.get_item(["users", "py"], "nope"))
found = client.store.search_items(["users"], filter={"theme": "dark"}, limit=5)
out("store.search_items", [(i["namespace"], i["key"], i["score"]) for i in found["items"]])
out("store.list_namespaces", client.store.list_namespaces(prefix=["users"], max_depth=3))
client.store.delete_item(["users", "py"], "prefs")
out("store.delete_item", [i["key"] for i in client.store.search_items(["users", "py"])["items"]])
out("store.put_item of a value not an object", error(lambda: client.store.put_item(["a", "b"], "k", 3)))

# Many runs and threads at once.
out("runs.cancel_many with none in flight", error(lambda: client.runs.cancel_many(status="all")))
out("threads.prune", client.threads.prune(["py-spin", "no-such-thread"]))
out("threads.get of a pruned thread", error(lambda: client.threads.get("py-spin")))

# Crons: runs made on a schedule.
cron = client.crons.create("three", schedule="0 0 1 1 *", input={"input": "py"}, metadata={"by": "py"}, on_run_completed="keep", timezone="Europe/Paris")
out("crons.create", {k: cron[k] for k in ("assistant_id", "schedule", "timezone", "on_run_completed", "enabled", "metadata")})
cron_thread = client.threads.create()
on_thread = client.crons.create_for_thread(cron_thread["thread_id"], "three", schedule="30 6 * * *", input={"input": "t"})
out("crons.create_for_thread", [on_thread["thread_id"] == cron_thread["thread_id"], on_thread["on_run_completed"]])
changed = client.crons.update(cron["cron_id"], schedule="15 3 * * *", enabled=False, end_time=None, metadata={"more": 1})
out("crons.update", {k: changed[k] for k in ("schedule", "enabled", "end_time", "metadata")})
out("crons.search", [c["enabled"] for c in client.crons.search(sort_by="created_at", sort_order="asc", select=["cron_id", "enabled"])])
out("crons.count", [client.crons.count(), client.crons.count(thread_id=cron_thread["thread_id"])])
out("crons.update with nothing", error(lambda: client.crons.update(cron["cron_id"])))
out("crons.create with a bad time zone", error(lambda: client.crons.create("three", schedule="* * * * *", input={"input": "x"}, timezone="Mars/Olympus")))
client.crons.delete(cron["cron_id"])
out("crons.delete again", error(lambda: client.crons.delete(cron["cron_id"])))
client.crons.delete(on_thread["cron_id"])
