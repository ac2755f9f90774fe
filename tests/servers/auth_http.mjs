// A streamable-HTTP MCP server that wants a bearer token: every request without
// `Authorization: Bearer $AUTH_TOKEN` gets 401. Its one tool, `whoami`, answers with
// the `X-Tenant` header the request came with, so a test sees the headers arrive.
// Listens on 127.0.0.1:$PORT at /mcp; stateless (a transport per request).
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const port = Number(process.env.PORT);
const token = process.env.AUTH_TOKEN;

function server(tenant) {
  const s = new Server({ name: "auth-http", version: "1.0.0" }, { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: "whoami", description: "The tenant the request named.", inputSchema: { type: "object", properties: {} } }],
  }));
  s.setRequestHandler(CallToolRequestSchema, async () => ({
    content: [{ type: "text", text: JSON.stringify({ tenant }) }],
  }));
  return s;
}

http
  .createServer(async (req, res) => {
    if (req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { "content-type": "application/json", "www-authenticate": "Bearer" });
      res.end(JSON.stringify({ error: "unauthorized" }));
      return;
    }
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => transport.close());
    await server(req.headers["x-tenant"] ?? null).connect(transport);
    await transport.handleRequest(req, res);
  })
  .listen(port, "127.0.0.1");
