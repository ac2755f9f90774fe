// A front end's calls to `switchyard serve`, through LangGraph's own JS client
// (@langchain/langgraph-sdk): seed 002's agent is asked to save meeting notes, pauses
// to ask which file, and the answer resumes it.
//
//   API_URL=http://127.0.0.1:2024 node examples/ask_human.mjs
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.API_URL ?? "http://127.0.0.1:2024" });

const assistants = await client.assistants.search();
console.log("serving:", assistants.map((a) => a.graph_id).join(", "));

const thread = await client.threads.create();
let question;
for await (const part of client.runs.stream(thread.thread_id, "tool_agent", {
  input: { user_message: "Save my meeting notes to a file: 'Decided to ship on Friday.'" },
  streamMode: ["updates"],
})) {
  if (part.event === "updates" && part.data.__interrupt__) {
    question = part.data.__interrupt__[0].value.question;
  }
}
console.log("the agent asks:", question);

const done = await client.runs.wait(thread.thread_id, "tool_agent", {
  command: { resume: { answer: "meetings/2025-06-30.md" } },
});
console.log("the agent says:", done.final_response);
