#!/usr/bin/env python3
"""The tools of {{name}}: an MCP server over stdio, written with FastMCP.

Switchyard starts this file as the graph's `[servers.tools]` and talks MCP to it over
stdin and stdout; stderr lines become the run's `server_stderr` events. Each function
decorated with `@mcp.tool()` is a tool: its name is the function's name, its description
the docstring, its input schema comes from the parameters' type hints, and its result
schema (`outputSchema`) from the return type. Raise `ToolError` to answer with an
error (`isError`, its message in the text): an `mcp_call` node then fails and takes its
`on_error` edge, and a chat model reads the error as the tool's answer. (Any other
exception is an error too, but mcp 2.x keeps its message to the server's log.)

    pip install -r tools/requirements.txt      # in the virtual environment you run from
    switchyard tools {{name}}.toml             # starts this server and lists its tools

Replace the sample data and tools with your own; keep the tools.json file and the
tests in step with them (docs/custom-code.md).
"""

from typing import Annotated, Literal

from pydantic import BaseModel, Field

try:  # mcp 2.x renamed FastMCP to MCPServer; the API used here is the same.
    from mcp.server.mcpserver import MCPServer as FastMCP
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP
    from mcp.server.fastmcp.exceptions import ToolError

# WARNING: no log line on stderr for every request (each would be a `server_stderr` event).
mcp = FastMCP("{{name}}-tools", log_level="WARNING")


class Order(BaseModel):
    order_id: str
    status: Literal["processing", "shipped", "delivered", "cancelled"]
    items: list[str]
    total: float = Field(description="In US dollars.")
    tracking_number: str | None = Field(description="Set once the order has shipped.")


class Shipment(BaseModel):
    tracking_number: str
    carrier: str
    status: Literal["in_transit", "out_for_delivery", "delivered"]
    location: str
    estimated_delivery: str = Field(description="A date, YYYY-MM-DD.")


# Sample data: stands in for your database or API.
ORDERS = {
    "A-1001": Order(order_id="A-1001", status="shipped", items=["blue mug", "tea towel"], total=19.5, tracking_number="TRK-555"),
    "A-1002": Order(order_id="A-1002", status="processing", items=["red kettle"], total=34.0, tracking_number=None),
}
SHIPMENTS = {
    "TRK-555": Shipment(tracking_number="TRK-555", carrier="Parcelpost", status="in_transit", location="Leeds depot", estimated_delivery="2025-07-02"),
}


@mcp.tool()
def lookup_order(order_id: Annotated[str, Field(description="The order's id, such as A-1001.")]) -> Order:
    """Look up an order by its id: its status, items, total and tracking number."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"no order {order_id}")
    return order


@mcp.tool()
def track_shipment(tracking_number: Annotated[str, Field(description="The tracking number of a shipped order, such as TRK-555.")]) -> Shipment:
    """Track a shipped parcel: where it is and when it should arrive."""
    shipment = SHIPMENTS.get(tracking_number.strip().upper())
    if shipment is None:
        raise ToolError(f"no shipment {tracking_number}")
    return shipment


if __name__ == "__main__":
    mcp.run()  # stdio
