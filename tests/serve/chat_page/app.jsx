// A chat page as LangGraph front ends are written (agent-chat-ui's calls, trimmed):
// `useStream` from LangGraph's React SDK against `switchyard serve`'s `chat_agent`.
// Nothing here knows it is not LangGraph's server: the API URL comes from the query.
import { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const query = new URLSearchParams(location.search);
const apiUrl = query.get("api");

// A message's text: a string, or the text blocks of a list (images shown as a mark).
function text(content) {
  if (typeof content === "string") return content;
  return (content ?? [])
    .map((b) => (b.type === "text" ? b.text : `[${b.type}]`))
    .join(" ");
}

function Branches({ meta, stream }) {
  const options = meta?.branchOptions;
  if (!options || options.length < 2) return null;
  const at = options.indexOf(meta.branch);
  return (
    <span className="branches">
      <button className="prev" disabled={at <= 0} onClick={() => stream.setBranch(options[at - 1])}>‹</button>
      <span className="branch">{at + 1} / {options.length}</span>
      <button className="next" disabled={at >= options.length - 1} onClick={() => stream.setBranch(options[at + 1])}>›</button>
    </span>
  );
}

// The approval of a write, drawn under the last message only (agent-chat-ui compares
// the last message's id with each message's).
function Approval({ interrupt, stream }) {
  const request = interrupt.value.action_requests[0];
  const decide = (decision) =>
    stream.submit(undefined, { command: { resume: { decisions: [decision] } }, streamResumable: true });
  return (
    <div className="approval">
      <div className="what">{request.description}</div>
      <button className="approve" onClick={() => decide({ type: "approve" })}>Approve</button>
      <button className="reject" onClick={() => decide({ type: "reject", message: "Not now." })}>Reject</button>
    </div>
  );
}

function Message({ message, last, stream }) {
  const meta = stream.getMessagesMetadata(message);
  const parent = meta?.firstSeenState?.parent_checkpoint;
  const [editing, setEditing] = useState(null);
  const isLast = last?.id === message.id;
  return (
    <div className={`msg ${message.type}`} data-id={message.id}>
      {editing === null ? (
        <div className="text">{text(message.content)}</div>
      ) : (
        <div>
          <input className="edit-text" value={editing} onChange={(e) => setEditing(e.target.value)} />
          <button
            className="save"
            onClick={() => {
              setEditing(null);
              stream.submit(
                { messages: [{ type: "human", content: editing }] },
                { checkpoint: parent, streamResumable: true },
              );
            }}
          >
            Save
          </button>
        </div>
      )}
      {message.tool_calls?.map((c) => (
        <div className="call" key={c.id}>calls {c.name}</div>
      ))}
      <div className="meta">
        <Branches meta={meta} stream={stream} />
        {message.type === "human" && (
          <button className="edit" onClick={() => setEditing(text(message.content))}>Edit</button>
        )}
        {message.type === "ai" && (
          <button
            className="regenerate"
            disabled={stream.isLoading}
            onClick={() => stream.submit(undefined, { checkpoint: parent, streamResumable: true })}
          >
            Regenerate
          </button>
        )}
      </div>
      {isLast && stream.interrupt && <Approval interrupt={stream.interrupt} stream={stream} />}
    </div>
  );
}

function App() {
  const [threadId, setThreadId] = useState(query.get("thread"));
  const [draft, setDraft] = useState("");
  const [image, setImage] = useState(null);
  const stream = useStream({
    apiUrl,
    assistantId: "chat_agent",
    messagesKey: "messages",
    threadId,
    fetchStateHistory: true,
    reconnectOnMount: true,
    onThreadId: (id) => {
      setThreadId(id);
      query.set("thread", id);
      history.replaceState(null, "", `?${query}`);
    },
    onError: (e) => console.error(`stream error: ${e}`),
  });
  const last = stream.messages[stream.messages.length - 1];
  const send = () => {
    const content = image
      ? [{ type: "text", text: draft }, { type: "image", source_type: "base64", mime_type: image.type, data: image.data }]
      : draft;
    const message = { type: "human", content };
    setDraft("");
    setImage(null);
    stream.submit(
      { messages: [message] },
      {
        streamResumable: true,
        optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), message] }),
      },
    );
  };
  const attach = async (e) => {
    const file = e.target.files[0];
    const bytes = new Uint8Array(await file.arrayBuffer());
    let binary = "";
    for (const b of bytes) binary += String.fromCharCode(b);
    setImage({ type: file.type, data: btoa(binary) });
  };
  return (
    <main>
      <h1>Chat</h1>
      <div id="messages">
        {stream.messages.map((m) => (
          <Message key={m.id} message={m} last={last} stream={stream} />
        ))}
      </div>
      <div id="status">{stream.isLoading ? "working" : "ready"}</div>
      <div id="composer">
        <input id="input" value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="Type a message" />
        <input id="file" type="file" accept="image/*" onChange={attach} />
        <button id="send" disabled={!draft} onClick={send}>Send</button>
        {stream.isLoading && <button id="stop" onClick={() => stream.stop()}>Stop</button>}
      </div>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
