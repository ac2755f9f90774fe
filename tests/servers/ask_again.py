"""A tool that asks for input the 2026-07-28 way (SEP-2322, multi round-trip
requests): `greet` answers its first call with an `input_required` result (an
elicitation and an opaque `requestState`) and its retry, which carries the answer
and the state as they went out, with the greeting. Stateless: the state is echoed
back, not kept. Run by the Python MCP SDK (PyPI `mcp` 2.x) over stdio."""

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)

server = MCPServer("ask_again")


@server.tool()
async def greet(ctx: Context) -> str | InputRequiredResult:
    """Greets whoever says who they are."""
    answers = ctx.input_responses
    if not answers:
        return InputRequiredResult(
            input_requests={
                "who": ElicitRequest(
                    params=ElicitRequestFormParams(
                        message="Who is asking?",
                        requested_schema={
                            "type": "object",
                            "properties": {"name": {"type": "string", "minLength": 1}},
                            "required": ["name"],
                        },
                    )
                )
            },
            request_state="asked-once",
        )
    answer = answers["who"]
    if not isinstance(answer, ElicitResult) or answer.action != "accept":
        return f"no name ({getattr(answer, 'action', answer)})"
    return f"hello {answer.content['name']} (state {ctx.request_state})"


def question(message: str) -> ElicitRequest:
    return ElicitRequest(
        params=ElicitRequestFormParams(
            message=message,
            requested_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        )
    )


@server.tool()
async def greet_twice(ctx: Context) -> str | InputRequiredResult:
    """Asks who is asking, then (a second round) who they are asking for."""
    answers = ctx.input_responses or {}
    if "who" not in answers:
        return InputRequiredResult(input_requests={"who": question("Who is asking?")})
    if "for" not in answers:
        return InputRequiredResult(
            input_requests={"for": question("For whom?")}, request_state="round-2"
        )
    return "both answered"


@server.tool()
async def summarize(ctx: Context) -> str | InputRequiredResult:
    """Asks the client's model for a completion inside its result."""
    answers = ctx.input_responses or {}
    if "summary" not in answers:
        return InputRequiredResult(
            input_requests={
                "summary": CreateMessageRequest(
                    params=CreateMessageRequestParams(
                        messages=[
                            SamplingMessage(
                                role="user", content=TextContent(type="text", text="Summarize.")
                            )
                        ],
                        max_tokens=20,
                    )
                )
            }
        )
    return "summarized"


if __name__ == "__main__":
    server.run()
