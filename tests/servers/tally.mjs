// A stdio MCP server with a side effect to count: `mark` appends a line to the file
// named by its first argument, `PARENT KEY` (PARENT: the pid of the process that
// started this server, i.e. the Switchyard server whose run called it), so a test can
// tell which process made each call and whether a call was made twice.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { appendFileSync } from "node:fs";

const file = process.argv[2];
const tools = [
  {
    name: "mark",
    description: "Appends a line naming the caller and the key.",
    inputSchema: { type: "object", properties: { key: { type: "integer" } }, required: ["key"] },
  },
];
const server = new Server({ name: "tally", version: "1.0.0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  appendFileSync(file, `${process.ppid} ${request.params.arguments.key}\n`);
  return { content: [{ type: "text", text: "marked" }] };
});
await server.connect(new StdioServerTransport());
