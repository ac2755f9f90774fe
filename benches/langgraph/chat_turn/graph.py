"""The benchmark graph: one node that streams a ChatOpenAI reply to the conversation
(system prompt "You are a brief assistant.") and appends it to `messages`."""
from typing import Annotated, TypedDict

from langchain_core.messages import AnyMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


model = ChatOpenAI(model="scripted", streaming=True)
SYSTEM = SystemMessage("You are a brief assistant.")


async def reply(state: State) -> dict:
    answer = await model.ainvoke([SYSTEM, *state["messages"]])
    return {"messages": [answer]}


builder = StateGraph(State)
builder.add_node("reply", reply)
builder.add_edge(START, "reply")
builder.add_edge("reply", END)
graph = builder.compile()
