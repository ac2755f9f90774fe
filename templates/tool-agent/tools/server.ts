#!/usr/bin/env node
// The tools of {{name}}: an MCP server over stdio, written with the MCP TypeScript SDK
// (@modelcontextprotocol/sdk). The same tools as tools/server.py, for teams that write
// TypeScript; the graph's `[servers.tools] command` says which of the two runs.
//
// Switchyard starts this file and talks MCP to it over stdin and stdout; stderr lines
// become the run's `server_stderr` events. Each `registerTool` is a tool: its input
// schema and result schema (`outputSchema`) are zod shapes. A result with `isError: true`
// is an error: an `mcp_call` node then fails and takes its `on_error` edge, and a chat
// model reads the error as the tool's answer.
//
//   cd tools && npm install                  # the SDK and zod, from tools/package.json
//   switchyard tools {{name}}.toml           # starts this server and lists its tools
//
// Node runs the file as it is (Node 22.18 or later strips the types; on 22.6 to 22.17
// use `node --experimental-strip-types`), or compile it with `tsc` and run the .js.

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const Order = z.object({
  order_id: z.string(),
  status: z.enum(["processing", "shipped", "delivered", "cancelled"]),
  items: z.array(z.string()),
  total: z.number().describe("In US dollars."),
  tracking_number: z.string().nullable().describe("Set once the order has shipped."),
});
type Order = z.infer<typeof Order>;

const Shipment = z.object({
  tracking_number: z.string(),
  carrier: z.string(),
  status: z.enum(["in_transit", "out_for_delivery", "delivered"]),
  location: z.string(),
  estimated_delivery: z.string().describe("A date, YYYY-MM-DD."),
});
type Shipment = z.infer<typeof Shipment>;

// Sample data: stands in for your database or API.
const ORDERS: Record<string, Order> = {
  "A-1001": { order_id: "A-1001", status: "shipped", items: ["blue mug", "tea towel"], total: 19.5, tracking_number: "TRK-555" },
  "A-1002": { order_id: "A-1002", status: "processing", items: ["red kettle"], total: 34.0, tracking_number: null },
};
const SHIPMENTS: Record<string, Shipment> = {
  "TRK-555": { tracking_number: "TRK-555", carrier: "Parcelpost", status: "in_transit", location: "Leeds depot", estimated_delivery: "2025-07-02" },
};

/** A tool's answer: the value as JSON text (what a model reads) and as structured content. */
function ok<T extends object>(value: T) {
  return { content: [{ type: "text" as const, text: JSON.stringify(value, null, 2) }], structuredContent: value };
}

/** A tool's error answer, with its message as the text. */
function error(tool: string, message: string) {
  return { content: [{ type: "text" as const, text: `Error executing tool ${tool}: ${message}` }], isError: true };
}

const server = new McpServer({ name: "{{name}}-tools", version: "0.1.0" });

server.registerTool(
  "lookup_order",
  {
    description: "Look up an order by its id: its status, items, total and tracking number.",
    inputSchema: { order_id: z.string().describe("The order's id, such as A-1001.") },
    outputSchema: Order.shape,
  },
  async ({ order_id }) => {
    const order = ORDERS[order_id.trim().toUpperCase()];
    return order ? ok(order) : error("lookup_order", `no order ${order_id}`);
  },
);

server.registerTool(
  "track_shipment",
  {
    description: "Track a shipped parcel: where it is and when it should arrive.",
    inputSchema: { tracking_number: z.string().describe("The tracking number of a shipped order, such as TRK-555.") },
    outputSchema: Shipment.shape,
  },
  async ({ tracking_number }) => {
    const shipment = SHIPMENTS[tracking_number.trim().toUpperCase()];
    return shipment ? ok(shipment) : error("track_shipment", `no shipment ${tracking_number}`);
  },
);

await server.connect(new StdioServerTransport());
