// A stdio MCP server whose tools have schemas real servers list: `shot` lists a
// property with a default as required (as @playwright/mcp's `browser_take_screenshot`
// does), `remote` refers to a schema on the network (`$ref` to an https URL). Each
// answers with the arguments it was given.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const tools = [
  {
    name: "shot",
    description: "Takes a screenshot.",
    inputSchema: {
      type: "object",
      properties: {
        type: { type: "string", enum: ["png", "jpeg"], default: "png" },
        filename: { type: "string" },
      },
      required: ["type"],
    },
  },
  {
    name: "remote",
    description: "Goes somewhere.",
    inputSchema: {
      type: "object",
      properties: {
        where: { $ref: "https://schemas.example.com/place.json" },
        n: { type: "integer" },
      },
      required: ["n"],
    },
  },
];
const server = new Server({ name: "odd", version: "1.0.0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (request) => ({
  content: [{ type: "text", text: JSON.stringify(request.params.arguments ?? {}) }],
}));
await server.connect(new StdioServerTransport());
