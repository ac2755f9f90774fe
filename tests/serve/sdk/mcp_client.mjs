// The official MCP TypeScript SDK's client (@modelcontextprotocol/sdk from npm),
// unmodified, against `switchyard serve`'s `/mcp` at $API_URL: every served graph a
// tool. Prints one JSON line per step; the Rust test compares them.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const out = (step, value) => console.log(JSON.stringify({ step, value }));
const headers = process.env.API_KEY ? { "x-api-key": process.env.API_KEY } : {};
const transport = new StreamableHTTPClientTransport(new URL(`${process.env.API_URL}/mcp`), {
  requestInit: { headers },
});
const client = new Client({ name: "switchyard-test", version: "1.0.0" });
await client.connect(transport);
out("server", client.getServerVersion());
out("capabilities", client.getServerCapabilities());

const { tools } = await client.listTools();
out("tools", tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema })));

const three = await client.callTool({ name: "three", arguments: { input: "x" } });
out("call three", three);
const refused = await client.callTool({ name: "three", arguments: {} });
out("call three without its input", refused);

const paused = await client.callTool({ name: "ask", arguments: {} });
out("call ask", { isError: paused.isError, interrupt: paused.structuredContent.__interrupt__.map((i) => i.value) });
const answered = await client.callTool({
  name: "answer_interrupt",
  arguments: { thread_id: paused.structuredContent.thread_id, resume: "yes" },
});
out("answer_interrupt", answered);

const elsewhere = await client.callTool({
  name: "answer_interrupt",
  arguments: { thread_id: "a-thread-of-the-api", resume: "yes" },
});
out("answer_interrupt on a thread no call made", elsewhere);

try {
  await client.callTool({ name: "nope", arguments: {} });
  out("unknown tool", "no error");
} catch (e) {
  out("unknown tool", e.message);
}
await client.close();
