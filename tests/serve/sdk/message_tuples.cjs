// The `messages-tuple` events of a run (a JSON list of their data on stdin) joined as
// `useStream` joins them: by the SDK's own MessageTupleManager (not exported, so
// loaded from its file), into a list of messages as the stream's manager keeps it
// (`dist/ui/manager.js`: a message at the index it first took; a `remove` takes it
// out). Prints each message as the page would hold it at the end.
const { MessageTupleManager, toMessageDict } = require(
  require("node:path").join(
    process.cwd(),
    "node_modules/@langchain/langgraph-sdk/dist/ui/messages.cjs",
  ),
);
const events = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const manager = new MessageTupleManager();
let messages = [];
for (const [message, metadata] of events) {
  const id = manager.add(message, metadata);
  if (!id) continue;
  const { chunk, index } = manager.get(id, messages.length) ?? {};
  if (!chunk || index == null) continue;
  if (chunk.getType() === "remove") messages.splice(index, 1);
  else messages[index] = { id, ...toMessageDict(chunk) };
}
const out = messages.map((m) => ({ id: m.id, type: m.type, content: m.content, tool_calls: m.tool_calls ?? [] }));
console.log(JSON.stringify(out));
