# The official A2A client (a2a-sdk 1.3.0 from PyPI), unmodified, against
# `switchyard serve`'s `/a2a/{assistant}` at $API_URL: a conversation in one context, a
# task waiting for input and answered, a task read back, a graph that cannot talk.
# Prints one JSON line per step; the Rust test compares them.
import asyncio
import json
import os

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_stream_response_text
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

BASE = os.environ["API_URL"]
HEADERS = {"x-api-key": os.environ["API_KEY"]} if os.environ.get("API_KEY") else {}


def out(step, value):
    print(json.dumps({"step": step, "value": value}), flush=True)


def says(text, n, **kw):
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=f"m{n}", parts=[Part(text=text)], **kw)
    )


async def client_for(http, assistant):
    card = await A2ACardResolver(http, f"{BASE}/a2a/{assistant}").get_agent_card()
    return card, ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)


async def turn(client, request):
    async for ev in client.send_message(request):
        return ev


async def main():
    async with httpx.AsyncClient(timeout=60, headers=HEADERS) as http:
        card, echo = await client_for(http, "echo")
        out("card", {"name": card.name, "description": card.description, "streaming": card.capabilities.streaming,
                     "interfaces": [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces]})
        first = await turn(echo, says("hi", 1))
        out("send", {"state": TaskState.Name(first.task.status.state), "reply": get_stream_response_text(first)})
        again = await turn(echo, says("and again", 2, context_id=first.task.context_id))
        out("send in the same context", {
            "reply": get_stream_response_text(again),
            "same context": again.task.context_id == first.task.context_id,
            "history": [(Role.Name(m.role), [p.text for p in m.parts]) for m in again.task.history],
        })
        got = await echo.get_task(GetTaskRequest(id=again.task.id))
        out("get_task", {"state": TaskState.Name(got.status.state), "messages": len(got.history)})

        _, ask = await client_for(http, "ask_chat")
        paused = await turn(ask, says("start", 3))
        out("ask", {"state": TaskState.Name(paused.task.status.state),
                    "artifact": paused.task.artifacts[0].name})
        answered = await turn(ask, says("yes", 4, task_id=paused.task.id, context_id=paused.task.context_id))
        out("answer", {"state": TaskState.Name(answered.task.status.state), "same task": answered.task.id == paused.task.id,
                       "reply": get_stream_response_text(answered)})
        try:
            await turn(ask, says("again", 5, task_id=paused.task.id, context_id=paused.task.context_id))
            out("a done task", "no error")
        except Exception as e:
            out("a done task", f"{type(e).__name__}: {e}")

        _, three = await client_for(http, "three")
        try:
            await turn(three, says("x", 6))
            out("a graph without messages", "no error")
        except Exception as e:
            out("a graph without messages", f"{type(e).__name__}: {e}")


asyncio.run(main())
