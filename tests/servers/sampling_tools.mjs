// A stdio MCP server whose tool asks the client's model, offering it a tool of its own
// (sampling with tools, protocol 2025-11-25): `forecast` sends a `sampling/createMessage`
// with the tool `weather`; when the model calls it (`tool_use`), the server answers the
// call (`tool_result`) in a second request and returns the model's final text. The
// SDK refuses to send `tools` to a client that has not declared `sampling.tools`.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const weather = {
  name: "weather",
  description: "The weather in a city today.",
  inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const server = new Server({ name: "sampling-tools", version: "1.0.0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "forecast",
      description: "Asks the client's model for a forecast, with a weather tool it may call.",
      inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  ],
}));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const city = request.params.arguments.city;
  const messages = [{ role: "user", content: { type: "text", text: `Forecast for ${city}?` } }];
  const first = await server.createMessage({
    messages,
    tools: [weather],
    toolChoice: { mode: "auto" },
    maxTokens: 100,
  });
  if (first.stopReason !== "toolUse") {
    return { content: [{ type: "text", text: `no call: ${JSON.stringify(first.content)}` }] };
  }
  const blocks = Array.isArray(first.content) ? first.content : [first.content];
  const results = blocks
    .filter((b) => b.type === "tool_use")
    .map((b) => ({
      type: "tool_result",
      toolUseId: b.id,
      content: [{ type: "text", text: `Sunny in ${b.input.city}` }],
    }));
  const second = await server.createMessage({
    messages: [...messages, { role: "assistant", content: blocks }, { role: "user", content: results }],
    tools: [weather],
    toolChoice: { mode: "none" },
    maxTokens: 100,
  });
  const text = (Array.isArray(second.content) ? second.content : [second.content])
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("");
  return { content: [{ type: "text", text }] };
});
await server.connect(new StdioServerTransport());
