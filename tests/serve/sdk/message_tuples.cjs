// The `messages-tuple` events of a run (a JSON list of their data on stdin) joined as
// `useStream` joins them: by the SDK's own MessageTupleManager (not exported, so
// loaded from its file). Prints each message as the page would hold it at the end.
const { MessageTupleManager, toMessageDict } = require(
  require("node:path").join(
    process.cwd(),
    "node_modules/@langchain/langgraph-sdk/dist/ui/messages.cjs",
  ),
);
const events = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const manager = new MessageTupleManager();
const order = [];
for (const [message, metadata] of events) {
  const id = manager.add(message, metadata);
  if (id && !order.includes(id)) order.push(id);
}
const out = order.map((id) => {
  const m = toMessageDict(manager.get(id).chunk);
  return { id, type: m.type, content: m.content, tool_calls: m.tool_calls ?? [] };
});
console.log(JSON.stringify(out));
