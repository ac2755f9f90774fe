// A stdio MCP server whose tool list grows: `grow` adds the tool `extra` and tells
// the client its list changed (notifications/tools/list_changed). `roots` answers with
// the client's declared roots capability and the roots it lists (roots/list). `meta`
// answers with the idempotency key and the fencing token the call's `_meta` carries,
// and how many calls of `meta` it has had. `wait` waits ten seconds
// unless the client cancels it (notifications/cancelled), which `cancelled` then lists.
// `ask` asks the client for a name (elicitation/create) and greets it, naming the
// idempotency key of the call that got the answer.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const tool = (name) => ({ name, description: `The ${name} tool.`, inputSchema: { type: "object", properties: {} } });
const tools = [tool("grow"), tool("roots"), tool("meta"), tool("wait"), tool("cancelled"), tool("ask")];
const cancelled = [];
let metas = 0;
const server = new Server({ name: "growing", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  if (request.params.name === "wait") {
    await new Promise((done) => {
      const timer = setTimeout(done, 10000);
      extra.signal.addEventListener("abort", () => {
        cancelled.push({ request: String(extra.requestId), reason: String(extra.signal.reason ?? "") });
        clearTimeout(timer);
        done();
      });
    });
    return { content: [{ type: "text", text: "waited" }] };
  }
  if (request.params.name === "ask") {
    const answer = await server.elicitInput({
      message: "Who is asking?",
      requestedSchema: { type: "object", properties: { name: { type: "string", minLength: 1 } }, required: ["name"] },
    });
    const key = request.params._meta?.["switchyard/idempotencyKey"];
    const text = answer.action === "accept" ? `hello ${answer.content.name} [${key}]` : answer.action;
    return { content: [{ type: "text", text }] };
  }
  if (request.params.name === "cancelled") {
    return { content: [{ type: "text", text: JSON.stringify(cancelled) }] };
  }
  if (request.params.name === "roots") {
    const declared = server.getClientCapabilities()?.roots !== undefined;
    const roots = declared ? (await server.listRoots()).roots : null;
    return { content: [{ type: "text", text: JSON.stringify({ declared, roots }) }] };
  }
  if (request.params.name === "meta") {
    const meta = request.params._meta ?? {};
    const token = meta["switchyard/fencingToken"];
    const fenced = token === undefined ? "" : ` fenced by ${token}`;
    metas += 1;
    return { content: [{ type: "text", text: `${meta["switchyard/idempotencyKey"]}${fenced} (call ${metas})` }] };
  }
  if (request.params.name === "grow" && !tools.some((t) => t.name === "extra")) {
    tools.push(tool("extra"));
    await server.sendToolListChanged();
  }
  return { content: [{ type: "text", text: `${request.params.name} done` }] };
});
await server.connect(new StdioServerTransport());
