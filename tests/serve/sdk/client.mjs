// LangGraph's official JS client (@langchain/langgraph-sdk from npm), unmodified,
// against `switchyard serve` at $API_URL: the calls a chat front end and its
// `useStream` hook make. Prints one JSON line per step; the Rust test compares them.
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.API_URL, apiKey: process.env.API_KEY });
const out = (step, value) => console.log(JSON.stringify({ step, value }));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const error = async (fn) => {
  try {
    await fn();
    return "no error";
  } catch (e) {
    return e.message;
  }
};

// A thread, as useStream's submit makes one.
const thread = await client.threads.create({ threadId: "sdk-chat", metadata: { user: "ann" } });
out("threads.create", { thread_id: thread.thread_id, status: thread.status, metadata: thread.metadata });

// A streamed run in three modes; the run id comes from Content-Location.
let created;
const parts = [];
for await (const part of client.runs.stream(thread.thread_id, "chat", {
  input: { messages: [{ type: "human", content: "What is 2 + 2?" }], question: "What is 2 + 2?" },
  streamMode: ["values", "updates", "messages-tuple"],
  streamResumable: true,
  onDisconnect: "cancel",
  onRunCreated: (meta) => (created = meta),
})) {
  parts.push(part);
}
out("runs.stream events", parts.map((p) => p.event));
out("runs.stream onRunCreated", { thread_id: created.thread_id, same_run: created.run_id === parts[0].data.run_id });
// The message the chunks make, as useStream assembles them by id.
const chunks = parts.filter((p) => p.event === "messages" && p.data[0].type === "AIMessageChunk");
out("messages-tuple text", chunks.map((p) => p.data[0].content).join(""));
const last = parts.filter((p) => p.event === "values").at(-1).data;
out("interrupt in values", last.__interrupt__);

// Where useStream finds the interrupt after the stream: the thread's state.
const paused = await client.threads.getState(thread.thread_id);
out("threads.getState", { next: paused.next, interrupts: paused.tasks.flatMap((t) => t.interrupts) });

// A wrong answer: a 4xx with the diagnostic, and the thread as it was.
out("resume with a wrong answer", await error(() => client.runs.wait(thread.thread_id, "chat", { command: { resume: { confirmed: "yes" } } })));
out("state unchanged", JSON.stringify(await client.threads.getState(thread.thread_id)) === JSON.stringify(paused));

// The answer, as useStream's submit(null, { command }) sends it.
const resumed = [];
for await (const part of client.runs.stream(thread.thread_id, "chat", {
  input: null,
  command: { resume: { confirmed: true } },
  streamMode: ["values"],
})) {
  resumed.push(part);
}
out("resumed values", resumed.filter((p) => p.event === "values").map((p) => p.data.decision));

// A person's edit, then the history newest first.
const update = await client.threads.updateState(thread.thread_id, { values: { question: "What is 3 + 3?" } });
out("threads.updateState", update.checkpoint.checkpoint_id);
const history = await client.threads.getHistory(thread.thread_id, { limit: 3 });
out(
  "threads.getHistory",
  history.map((h) => [h.checkpoint.checkpoint_id, h.metadata.source, h.next, h.parent_checkpoint?.checkpoint_id ?? null]),
);
const before = await client.threads.getHistory(thread.thread_id, { limit: 1, before: { configurable: { checkpoint_id: history[1].checkpoint.checkpoint_id } } });
out("threads.getHistory before", before.map((h) => h.checkpoint.checkpoint_id));

// A long run: cancelled (the stop button), then queued and refused runs.
const spin = await client.threads.create({ threadId: "sdk-spin" });
const first = await client.runs.create(spin.thread_id, "spin", { input: { label: "first" } });
while ((await client.runs.get(spin.thread_id, first.run_id)).status !== "running") await sleep(20);
out("a concurrent run (reject)", await error(() => client.runs.create(spin.thread_id, "spin", { input: { label: "x" }, multitaskStrategy: "reject" })));
// Enqueued: LangGraph's default.
const second = await client.runs.create(spin.thread_id, "spin", { input: { label: "second" } });
out("an enqueued run", second.status);
await client.runs.cancel(spin.thread_id, first.run_id, true);
out("runs.cancel", (await client.runs.get(spin.thread_id, first.run_id)).status);
while ((await client.runs.get(spin.thread_id, second.run_id)).status !== "running") await sleep(20);
out("the enqueued run runs", "running");

// A stream dropped after a few events, then joined from the last event seen.
const controller = new AbortController();
const seen = [];
let dropped;
try {
  for await (const part of client.runs.stream(spin.thread_id, "spin", {
    input: { label: "third" },
    streamMode: ["updates"],
    streamResumable: true,
    multitaskStrategy: "interrupt",
    signal: controller.signal,
    onRunCreated: (meta) => (dropped = meta.run_id),
  })) {
    seen.push(part);
    if (seen.length === 4) controller.abort();
  }
} catch (e) {
  out("the first reader went away", e.name);
}
await client.runs.cancel(spin.thread_id, dropped, true);
const rest = [];
for await (const part of client.runs.joinStream(spin.thread_id, dropped, { lastEventId: seen.at(-1).id, streamMode: ["updates"] })) {
  rest.push(part);
}
const label = (p) => p.data?.tick?.n;
out("joinStream picks up where it was", {
  first_after_join: rest[1] && label(rest[1]) === label(seen.at(-1)) + 1,
  gapless: rest.slice(1).every((p, i, a) => i === 0 || label(p) === label(a[i - 1]) + 1),
});
out("runs.list", (await client.runs.list(spin.thread_id)).map((r) => r.status));

// A finished run joined again with Last-Event-ID -1, as useStream does on mount.
const replay = [];
for await (const part of client.runs.joinStream(thread.thread_id, created.run_id, { lastEventId: "-1" })) {
  replay.push(part.event);
}
out("joinStream from the start", replay);
out("threads.search", (await client.threads.search({ metadata: { user: "ann" } })).map((t) => [t.thread_id, t.status]));
out("threads.copy", (await client.threads.copy(thread.thread_id)).values.decision);
await client.threads.delete("sdk-chat");
out("threads.delete then get", await error(() => client.threads.get("sdk-chat")));
out("assistants.search", (await client.assistants.search()).map((a) => a.graph_id));
out("assistants.getGraph", (await client.assistants.getGraph("chat")).edges.length);
out("assistants.getSchemas", Object.keys((await client.assistants.getSchemas("chat")).input_schema.properties));

// Assistants: a graph bound to values of its constants, in versions.
const made = await client.assistants.create({ graphId: "greet", context: { GREETING: "Hi" }, metadata: { by: "js" }, name: "js-greeter" });
out("assistants.create", { graph: made.graph_id, name: made.name, config: made.config, context: made.context, metadata: made.metadata, version: made.version });
out("runs.wait on it", (await client.runs.wait(null, made.assistant_id, { input: { question: "q" }, context: { MAX_STEPS: 2 } })).answer);
const patched = await client.assistants.update(made.assistant_id, { context: { GREETING: "Yo" }, metadata: { more: 1 } });
out("assistants.update", { context: patched.context, metadata: patched.metadata, version: patched.version });
out("assistants.getVersions", (await client.assistants.getVersions(made.assistant_id)).map((v) => v.version));
out("assistants.setLatest", (await client.assistants.setLatest(made.assistant_id, 1)).context);
out("assistants.create with a wrong value", await error(() => client.assistants.create({ graphId: "greet", context: { MAX_STEPS: "many" } })));
await client.assistants.delete(made.assistant_id, { deleteThreads: true });
out("assistants.delete then get", await error(() => client.assistants.get(made.assistant_id)));

// The store: memory shared across threads.
await client.store.putItem(["users", "js"], "prefs", { theme: "dark", n: 3 });
await client.store.putItem(["users", "js", "notes"], "first", { text: "hi" }, { ttl: 5 });
const item = await client.store.getItem(["users", "js"], "prefs");
out("store.getItem", { namespace: item.namespace, key: item.key, value: item.value, dated: typeof item.createdAt === "string" || typeof item.created_at === "string" });
out("store.getItem missing", await client.store.getItem(["users", "js"], "nope"));
const found = await client.store.searchItems(["users"], { filter: { theme: "dark" }, limit: 5 });
out("store.searchItems", found.items.map((i) => [i.namespace, i.key]));
out("store.listNamespaces", await client.store.listNamespaces({ prefix: ["users"], maxDepth: 3 }));
await client.store.deleteItem(["users", "js"], "prefs");
out("store.deleteItem", (await client.store.searchItems(["users", "js"])).items.map((i) => i.key));
out("store.putItem with a bad value", await error(() => client.store.putItem(["users", "js"], "k", 3)));

// Crons: runs made on a schedule.
const cron = await client.crons.create("three", { schedule: "0 0 1 1 *", input: { input: "js" }, metadata: { by: "js" }, onRunCompleted: "keep" });
out("crons.create", { assistant: cron.assistant_id, schedule: cron.schedule, kept: cron.on_run_completed, enabled: cron.enabled, named: cron.payload.config.configurable.cron_id === cron.cron_id });
const cronThread = await client.threads.create();
const onThread = await client.crons.createForThread(cronThread.thread_id, "three", { schedule: "30 6 * * *", input: { input: "t" } });
out("crons.createForThread", { thread: onThread.thread_id === cronThread.thread_id, completed: onThread.on_run_completed });
const changed = await client.crons.update(cron.cron_id, { schedule: "15 3 * * *", enabled: false, metadata: { more: 1 } });
out("crons.update", { schedule: changed.schedule, enabled: changed.enabled, metadata: changed.metadata });
out("crons.search", (await client.crons.search({ select: ["cron_id", "enabled"], sortBy: "created_at", sortOrder: "asc" })).map((c) => [c.cron_id === cron.cron_id ? "first" : "second", c.enabled]));
out("crons.count", [await client.crons.count(), await client.crons.count({ threadId: cronThread.thread_id })]);
out("crons.create with a bad schedule", await error(() => client.crons.create("three", { schedule: "61 * * * *", input: { input: "x" } })));
await client.crons.delete(cron.cron_id);
out("crons.delete", await error(() => client.crons.delete(cron.cron_id)));
await client.crons.delete(onThread.cron_id);
