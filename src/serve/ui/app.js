// Switchyard's web page: a client of the server's own API (the one LangGraph's SDKs
// speak), written without a framework so that it ships inside the binary as it is.
"use strict";

const $ = (selector, root = document) => root.querySelector(selector);

/// An element: attributes (`on*` are listeners, `text` its text) and children.
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const show = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

// ---- The API ---------------------------------------------------------------------

let apiKey = localStorage.getItem("switchyard-api-key") || "";

function headers() {
  const out = { "content-type": "application/json" };
  if (apiKey) out["x-api-key"] = apiKey;
  return out;
}

async function api(method, path, body) {
  const r = await fetch(path, {
    method,
    headers: headers(),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (r.status === 401) askKey();
  const text = await r.text();
  let data = text;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (_) {
    // Not JSON: a drawing, or a plain message.
  }
  if (!r.ok) throw new Error((data && data.detail) || text || r.statusText);
  return data;
}

function askKey() {
  const box = $("#key");
  box.hidden = false;
  $("#key-input").focus();
}

$("#key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  apiKey = $("#key-input").value;
  localStorage.setItem("switchyard-api-key", apiKey);
  $("#key").hidden = true;
  route();
});

/// Reads a run's server-sent events as they come: `onEvent(name, data)` for each.
async function stream(path, body, onEvent) {
  const r = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
  if (!r.ok) {
    const text = await r.text();
    let detail = text;
    try {
      detail = JSON.parse(text).detail || text;
    } catch (_) {}
    throw new Error(detail);
  }
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  // A read of data already queued resolves as a microtask, so a run that streams
  // faster than the page reads never hands the thread back: clicks (the stop button)
  // and painting wait until the stream ends. Every few milliseconds of reading, the
  // loop yields to the event loop.
  let busySince = performance.now();
  const breathe = async () => {
    await new Promise((r) => setTimeout(r, 0));
    busySince = performance.now();
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    // One pass over what arrived: a fast run delivers megabytes at once, and cutting
    // the rest off after every event made reading it quadratic (the page froze).
    let at = 0;
    let cut;
    for (; (cut = buffer.indexOf("\n\n", at)) >= 0; at = cut + 2) {
      if (performance.now() - busySince > 8) await breathe();
      const block = buffer.slice(at, cut);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (!data.length) continue;
      let parsed = data.join("\n");
      try {
        parsed = JSON.parse(parsed);
      } catch (_) {}
      onEvent(name, parsed);
    }
    buffer = buffer.slice(at);
  }
}

// ---- Graphs ----------------------------------------------------------------------

let graphs = [];

async function loadGraphs() {
  graphs = await api("POST", "/assistants/search", { limit: 1000 });
  graphs.sort((a, b) => a.graph_id.localeCompare(b.graph_id));
  const side = $("#side");
  side.replaceChildren(
    h("h2", { text: "Graphs" }),
    h(
      "ul",
      {},
      graphs.map((g) =>
        h(
          "li",
          {},
          h(
            "a",
            { href: `#/graph/${encodeURIComponent(g.graph_id)}`, "data-graph": g.graph_id },
            h("span", { text: g.graph_id }),
            h("span", {
              class: `badge ${g.metadata.valid ? "valid" : "invalid"}`,
              text: g.metadata.valid ? "valid" : "invalid",
            }),
          ),
        ),
      ),
    ),
  );
}

function markCurrent(selector, value, attr) {
  for (const a of document.querySelectorAll(selector)) {
    if (a.getAttribute(attr) === value) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

/// Which route call is the latest: an earlier one still waiting on the API renders
/// nothing when it is done (its page is no longer the one asked for).
let routes = 0;
const stale = (turn) => turn !== routes;

async function graphPage(id, turn = routes) {
  markCurrent("aside a", id, "data-graph");
  const main = $("#main");
  const g = await api("GET", `/assistants/${encodeURIComponent(id)}`);
  const head = h(
    "div",
    {},
    h("h1", {}, g.graph_id, " ", h("span", { class: `badge ${g.metadata.valid ? "valid" : "invalid"}`, text: g.metadata.valid ? "valid" : "invalid" })),
    h("p", { class: "muted", text: `${g.metadata.file}${g.description ? " · " + g.description : ""}` }),
  );
  const parts = [head];
  if (g.metadata.problems) {
    parts.push(
      h("h2", { text: g.metadata.hash ? "The file on disk does not validate (the last good version is served)" : "The file does not validate" }),
      h("pre", { class: "diagnostics", role: "alert", text: g.metadata.problems }),
    );
  }
  if (!g.metadata.hash) {
    if (!stale(turn)) main.replaceChildren(...parts);
    return;
  }
  const [svg, details, schemas] = await Promise.all([
    api("GET", `/assistants/${encodeURIComponent(id)}/graph?format=svg`),
    api("GET", `/assistants/${encodeURIComponent(id)}/details`),
    api("GET", `/assistants/${encodeURIComponent(id)}/schemas`),
  ]);
  const drawing = h("div", { class: "drawing", "aria-label": "graph drawing" });
  drawing.innerHTML = svg;
  const nodePanel = h("div", { class: "panel", id: "node-details" }, h("p", { class: "muted", text: "Select a node to see its prompt, schema and rules." }));
  const runArea = h("div", { id: "run" });
  const form = inputForm(schemas.input_schema, schemas.config_schema, async (input, context, maxSteps) => {
    const thread = await api("POST", "/threads", { metadata: { graph_id: id } });
    const body = { assistant_id: id, input };
    if (Object.keys(context).length) body.context = context;
    if (maxSteps) body.max_steps = maxSteps;
    await watchRun(runArea, drawing, id, details, thread.thread_id, body);
  });
  for (const node of drawing.querySelectorAll(".node")) {
    const select = () => {
      for (const n of drawing.querySelectorAll(".node.selected")) n.classList.remove("selected");
      node.classList.add("selected");
      nodeDetails(nodePanel, node.dataset.node, details.nodes[node.dataset.node]);
    };
    node.addEventListener("click", select);
    node.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        select();
      }
    });
  }
  // A reloaded graph: what its edit changed (threads that stood where nothing changed
  // went on on it; the others stay on the version they started on).
  if (details.changes && details.changes.length) {
    const n = details.changes.length;
    parts.push(
      h(
        "details",
        { class: "changes panel", open: true },
        h("summary", { text: `Version ${details.version}: ${n} change${n === 1 ? "" : "s"} from the version before` }),
        h("ul", {}, details.changes.map((c) => h("li", {}, h("code", { text: c })))),
      ),
    );
  }
  parts.push(
    h("div", { class: "columns" }, h("div", {}, drawing, runArea), h("div", {}, h("div", { class: "panel" }, h("h2", { text: "Start a run" }), form), nodePanel)),
  );
  if (!stale(turn)) main.replaceChildren(...parts);
}

function nodeDetails(panel, name, d) {
  if (!d) {
    panel.replaceChildren(h("h2", { text: name }), h("p", { class: "muted", text: name.startsWith("__") ? "Where every run begins or ends." : "" }));
    return;
  }
  const rows = [h("h2", {}, name, " ", h("span", { class: "badge", text: d.kind }))];
  if (d.description) rows.push(h("p", { text: d.description }));
  const block = (label, value) => {
    if (value === null || value === undefined || (Array.isArray(value) && !value.length)) return;
    rows.push(h("h3", { text: label }), h("pre", { text: show(value) }));
  };
  block("Model", d.model);
  block("System prompt", d.system);
  block("Prompt", d.prompt);
  block("Output schema", d.schema);
  block("Resume schema", d.resume_schema);
  block("Rules", d.rules);
  if (d.server) block("Tools", `${d.server}: ${d.tools.join(", ")}${d.side_effects ? " (side effects)" : ""}`);
  panel.replaceChildren(...rows);
}

/// A form for a JSON Schema object: a field per property, typed by its schema. With
/// `keepDefaults`, a boolean is a choice whose empty first option sends nothing (a
/// checkbox always sends true or false), so the default stands.
function schemaFields(schema, keepDefaults = false) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const fields = [];
  for (const [name, s] of Object.entries(props)) {
    const type = Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type;
    let input;
    if (type === "boolean" && keepDefaults) input = h("select", { name, "data-type": "json" }, h("option", { value: "", text: `(default: ${s.default})` }), h("option", { value: "true", text: "true" }), h("option", { value: "false", text: "false" }));
    else if (type === "boolean") input = h("input", { type: "checkbox", name, "data-type": type });
    else if (type === "integer" || type === "number") input = h("input", { type: "number", name, "data-type": type, step: type === "integer" ? "1" : "any" });
    else if (type === "string" && !s.enum) input = h("input", { type: "text", name, "data-type": type });
    else if (Array.isArray(s.enum) && s.enum.every((v) => typeof v === "string")) {
      // The values a configurable string may take; empty keeps the default.
      input = h("select", { name, "data-type": "string" }, h("option", { value: "", text: s.default !== undefined ? `(default: ${s.default})` : "" }), ...s.enum.map((v) => h("option", { value: v, text: v })));
    }
    else input = h("textarea", { name, rows: 3, "data-type": "json", placeholder: "JSON" });
    if (required.has(name) && type !== "boolean") input.required = true;
    fields.push(h("label", {}, h("span", { text: `${name}${required.has(name) ? " *" : ""}` }), s.description ? h("span", { class: "muted", text: ` — ${s.description}` }) : null, input));
  }
  return fields;
}

/// The values of schemaFields' inputs; a field left empty is left out.
function fieldValues(form) {
  const out = {};
  for (const el of form.querySelectorAll("[data-type]")) {
    const type = el.dataset.type;
    if (type === "boolean") {
      out[el.name] = el.checked;
      continue;
    }
    if (el.value === "") continue;
    if (type === "integer" || type === "number") out[el.name] = Number(el.value);
    else if (type === "json") {
      try {
        out[el.name] = JSON.parse(el.value);
      } catch (_) {
        out[el.name] = el.value;
      }
    } else out[el.name] = el.value;
  }
  return out;
}

/// The run form: the graph's inputs, its configurable values (the run's `context`,
/// each left empty for its default) and a step limit.
function inputForm(schema, configSchema, start) {
  const error = h("div", { class: "error", role: "alert", hidden: true });
  const steps = h("input", { type: "number", name: "max_steps", min: "1", step: "1" });
  const button = h("button", { type: "submit", text: "Start run" });
  const inputs = h("div", {}, schemaFields(schema));
  const configurable = Object.keys((configSchema && configSchema.properties) || {}).length > 0;
  const config = configurable ? h("fieldset", { class: "config" }, h("legend", { text: "Configuration" }), schemaFields({ properties: configSchema.properties }, true)) : null;
  const form = h(
    "form",
    { class: "inputs" },
    inputs,
    config,
    h("label", {}, h("span", { text: "Max steps" }), h("span", { class: "muted", text: " — leave empty for the graph's own limit" }), steps),
    h("div", { class: "row" }, button),
    error,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.hidden = true;
    button.disabled = true;
    try {
      const input = fieldValues(inputs);
      const context = config ? fieldValues(config) : {};
      await start(input, context, steps.value ? Number(steps.value) : null);
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

// ---- Runs ------------------------------------------------------------------------

/// The image blobs a value holds (`{"blob": "sha256:...", "mime_type": "image/..."}`, as
/// a screenshot tool's result is kept in state), a few levels down.
function imageBlobs(value, out = [], depth = 0) {
  if (!value || typeof value !== "object" || depth > 3) return out;
  if (typeof value.blob === "string" && value.blob.startsWith("sha256:") && String(value.mime_type || "").startsWith("image/")) {
    out.push(value.blob);
    return out;
  }
  for (const v of Array.isArray(value) ? value : Object.values(value)) imageBlobs(v, out, depth + 1);
  return out;
}

/// An image of a blob, fetched with the API key (an <img> alone could not send it).
function blobImage(ref) {
  if (!/^sha256:[0-9a-f]{64}$/.test(ref)) return h("span", { class: "muted", text: "(not a blob reference)" });
  const img = h("img", { class: "shot", alt: `screenshot ${ref.slice(7, 19)}`, "data-blob": ref });
  fetch(`/blobs/${ref}`, { headers: headers() })
    .then((r) => (r.ok ? r.blob() : null))
    .then((b) => {
      if (!b) return;
      img.src = URL.createObjectURL(b);
      img.addEventListener("load", () => URL.revokeObjectURL(img.src), { once: true });
    });
  return img;
}

/// How many of a run's steps the page lists (the last ones).
const SHOWN_STEPS = 200;
/// How often, at most, a running run's steps are drawn (ms).
const DRAW_EVERY = 100;

/// A run's steps as the page lists them. A fast run makes steps faster than a page can
/// draw them: reading the stream only updates this model (the last SHOWN_STEPS steps,
/// what each showed, a count of the rest, the path on the drawing), and the page is
/// drawn from it at most every DRAW_EVERY ms and when the stream ends. A step's
/// elements are built when it is first drawn, so the many that scroll out unseen cost
/// next to nothing. Drawn per step, the page spent two thirds of its time in layout and
/// fell ever further behind the run: stopped, it said "running" for as long again.
function stepList(steps, earlier, drawing) {
  // A step is { node, el, detail, after }: `detail` and `after` hold what goes into its
  // element (text lines or functions building elements) until it is built.
  const shown = [...steps.children].map((el) => ({ node: el.dataset.node, el }));
  let hidden = Number(earlier.dataset.count || 0);
  let last = "__start__";
  let at = null;
  const visited = new Set();
  const taken = [];
  let drawn = 0;
  let timer = null;
  const make = (item) => (typeof item === "function" ? item() : h("div", { text: item }));
  const build = (step) => {
    if (!step.el) {
      step.el = h("li", { "data-node": step.node }, h("div", { class: "what", text: step.node }), h("div", { class: "detail" }, step.detail.map(make)), step.after.flatMap(make));
      step.detail = step.after = null;
    }
    return step.el;
  };
  const draw = () => {
    clearTimeout(timer);
    timer = null;
    drawn = performance.now();
    // Only what changed: the steps that scrolled out leave from the front, new ones join
    // at the end (laying the whole list out again cost ~40 ms a draw).
    const first = shown.length ? shown[0].el : null;
    while (steps.firstElementChild && steps.firstElementChild !== first) steps.firstElementChild.remove();
    const end = shown.findLastIndex((s) => s.el && s.el === steps.lastElementChild);
    steps.append(...shown.slice(end + 1).map(build));
    // Kept on the element: a resumed run goes on counting in the same list.
    earlier.dataset.count = hidden;
    steps.start = hidden + 1;
    earlier.hidden = hidden === 0;
    earlier.textContent = `${hidden} earlier step${hidden === 1 ? "" : "s"} not shown`;
    for (const n of drawing.querySelectorAll(".node.current")) n.classList.remove("current");
    for (const node of visited) {
      const el = drawing.querySelector(`.node[data-node="${CSS.escape(node)}"]`);
      if (el) el.classList.add("visited", ...(node === at ? ["current"] : []));
    }
    const edge = (from, to) => drawing.querySelector(`.edge[data-from="${CSS.escape(from)}"][data-to="${CSS.escape(to)}"]`);
    for (const [from, to] of taken) {
      const el = edge(from, to);
      if (el) el.classList.add("taken");
      // Branches that run together leave through a fork bar and meet at a join bar.
      for (const first of el ? [] : drawing.querySelectorAll(`.edge[data-from="${CSS.escape(from)}"]`)) {
        const second = first.dataset.to.startsWith("__") && edge(first.dataset.to, to);
        if (second) first.classList.add("taken"), second.classList.add("taken");
      }
    }
    visited.clear();
    taken.length = 0;
    if (at) visited.add(at);
  };
  const changed = () => {
    if (timer === null) timer = setTimeout(draw, Math.max(0, DRAW_EVERY - (performance.now() - drawn)));
  };
  return {
    draw,
    /// A new step at `node`.
    add(node) {
      const step = { node, el: null, detail: [], after: [] };
      shown.push(step);
      if (shown.length > SHOWN_STEPS) {
        shown.shift();
        hidden += 1;
      }
      changed();
      return step;
    },
    /// Adds to a step's details (`detail`) or below them (`after`): a line of text, or
    /// a function building elements.
    put(step, where, item) {
      if (!step.el) step[where].push(item);
      else (where === "detail" ? $(".detail", step.el) : step.el).append(...[make(item)].flat());
      changed();
    },
    /// The node at work (and, for the run's first, the edge from START to it).
    highlight(node) {
      visited.add(node);
      if (last === "__start__") this.route(last, node);
      at = node;
      last = node;
      changed();
    },
    /// An edge the run took, as its `route_taken` event says: parallel branches take
    /// several from one node, which the order of the nodes alone cannot tell.
    route(from, to) {
      if (!taken.some(([f, t]) => f === from && t === to)) taken.push([from, to]);
      changed();
    },
  };
}

/// Runs `body` on `thread` and shows it as it goes: the node at work highlighted, the
/// path drawn, a step per node with what it wrote, its model and tool calls and its
/// route; a stop button while it runs; the interrupt's form when it pauses.
async function watchRun(area, drawing, graph, details, thread, body) {
  for (const n of drawing.querySelectorAll(".node")) n.classList.remove("current", "visited");
  for (const e of drawing.querySelectorAll(".edge")) e.classList.remove("taken");
  const status = h("span", { class: "badge running", id: "run-status", text: "running" });
  const stop = h("button", { type: "button", class: "danger", text: "Stop" });
  const steps = h("ol", { class: "steps", "aria-live": "polite" });
  const earlier = h("p", { class: "earlier", hidden: true });
  const after = h("div");
  area.replaceChildren(
    h("div", { class: "panel" }, h("div", { class: "row" }, h("h2", { text: "Run" }), status, h("a", { href: `#/thread/${encodeURIComponent(thread)}`, text: `thread ${thread}` }), stop), earlier, steps, after),
  );
  await follow({ area, drawing, graph, details, thread, body, status, stop, steps, earlier, after });
}

async function follow(run) {
  const { drawing, graph, details, thread, body, status, stop, steps, earlier, after } = run;
  let runId = null;
  let current = null;
  stop.disabled = false;
  stop.onclick = async () => {
    if (!runId) return;
    stop.disabled = true;
    await api("POST", `/threads/${encodeURIComponent(thread)}/runs/${runId}/cancel`, {});
  };
  const list = stepList(steps, earlier, drawing);
  const detail = (line) => current && list.put(current, "detail", line);
  // The state before each node, to show what its writes changed.
  let before = null;
  after.replaceChildren();
  try {
    await stream(`/threads/${encodeURIComponent(thread)}/runs/stream`, { ...body, stream_mode: ["custom", "updates", "values"] }, (name, data) => {
      if (name === "metadata") runId = data.run_id;
      if (name === "custom") {
        switch (data.event) {
          case "node_started":
            current = list.add(data.node);
            list.highlight(data.node);
            break;
          case "llm_invocation":
            detail(`model ${data.model}: ${data.tokens_in} tokens in, ${data.tokens_out} out${data.cache_hit ? ", from the cache" : ""}, ${data.latency_ms} ms`);
            if (data.messages) {
              const text = data.messages.map((m) => `${m.role}: ${typeof m.content === "string" ? m.content : show(m.content)}`).join("\n\n");
              detail(() => h("details", { class: "prompt" }, h("summary", { text: "Prompt" }), h("pre", { text })));
            }
            if (data.reply) {
              const r = data.reply;
              const text = r.content !== undefined ? [r.content, r.refusal && `refused: ${r.refusal}`, ...(r.tool_calls || []).map((c) => `${c.name}(${c.arguments})`)].filter(Boolean).join("\n") : show(r);
              detail(() => h("details", { class: "reply" }, h("summary", { text: "Reply" }), h("pre", { text })));
            }
            break;
          case "llm_retry":
            detail(`model attempt ${data.attempt} failed (${data.error}); trying again in ${data.wait_ms} ms`);
            break;
          case "tool_call":
            detail(`tool ${data.server}/${data.tool}(${JSON.stringify(data.arguments)})${data.is_error ? " failed" : ""}, ${data.duration_ms} ms`);
            break;
          case "route_taken":
            list.route(data.from, data.to);
            detail(`route → ${data.to}${data.case ? ` (case ${data.case})` : ""}`);
            break;
          case "node_failed":
            detail(`failed: ${data.message}${data.handled ? " (handled)" : ""}`);
            break;
          case "interrupted":
            detail("paused for an answer");
            break;
          case "limit_reached":
            detail(`the ${data.limit} limit was reached${data.to ? `: on to ${data.to}` : ""}`);
            break;
          case "stopped":
            detail("stopped here");
            break;
          case "sign_in":
            // The authorization server's page, opened by the person; only a web URL
            // becomes a link.
            if (/^https?:\/\//.test(data.url)) {
              detail(() => h("div", { class: "sign-in" }, `server ${data.server} wants you to sign in: `, h("a", { href: data.url, target: "_blank", rel: "noopener noreferrer", text: "open the sign-in page" })));
            }
            break;
          default:
        }
      }
      if (name === "updates") {
        for (const [node, writes] of Object.entries(data)) {
          if (node.startsWith("__") || !writes || typeof writes !== "object") continue;
          const step = current && current.node === node ? current : list.add(node);
          // Built when drawn: the state before is kept as it was (each `values` event is
          // a new object), so a step that scrolls out unseen costs no rendering.
          const was = before;
          list.put(step, "after", () => [
            h(
              "ul",
              { class: "writes" },
              Object.entries(writes).map(([k, v]) => {
                const old = was && k in was ? JSON.stringify(was[k]) : undefined;
                const now = JSON.stringify(v);
                return h("li", { text: old === undefined || old === now ? `${k} = ${now}` : `${k}: ${old} → ${now}` });
              }),
            ),
            ...imageBlobs(writes).map(blobImage),
          ]);
        }
      }
      if (name === "values") before = data;
      if (name === "error") detail(`error: ${data.message || show(data)}`);
    });
  } catch (err) {
    after.replaceChildren(h("div", { class: "error", role: "alert", text: err.message }));
  }
  list.draw();
  stop.disabled = true;
  const state = await api("GET", `/threads/${encodeURIComponent(thread)}/state`);
  const runs = await api("GET", `/threads/${encodeURIComponent(thread)}/runs`);
  const mine = runs.find((r) => r.run_id === runId) || runs[0];
  const paused = state.interrupts && state.interrupts.length;
  const name = paused ? "paused" : mine ? mine.status : "unknown";
  status.textContent = name;
  status.className = `badge ${name}`;
  for (const n of drawing.querySelectorAll(".node.current")) n.classList.remove("current");
  if (state.next && state.next[0]) {
    const el = drawing.querySelector(`.node[data-node="${CSS.escape(state.next[0])}"]`);
    if (el) el.classList.add("current");
  }
  if (paused) {
    after.append(answerForm(state, details, async (resume) => {
      status.textContent = "running";
      status.className = "badge running";
      await follow({ ...run, body: { assistant_id: graph, command: { resume } } });
    }));
  } else if (mine && mine.error) {
    after.append(h("div", { class: "error", role: "alert", text: mine.error }));
  }
}

/// The form answering a paused thread's interrupt, built from its node's resume schema:
/// yes / no buttons for a lone boolean, fields for the rest, a text box with none.
function answerForm(state, details, send) {
  const interrupt = state.interrupts[0];
  const node = state.next && state.next[0];
  const d = (details && details.nodes[node]) || {};
  // An MCP server's question (an elicitation) carries its own schema.
  const asked = interrupt.value && interrupt.value.kind === "elicitation" ? interrupt.value.requested_schema : null;
  const schema = asked || (d.resume_schema && typeof d.resume_schema === "object" ? d.resume_schema : null);
  const error = h("div", { class: "error", role: "alert", hidden: true });
  // One answer at a time: the buttons wait while it is sent.
  const submit = async (value) => {
    error.hidden = true;
    const buttons = [...form.querySelectorAll("button")];
    for (const b of buttons) b.disabled = true;
    try {
      await send(value);
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  };
  const props = (schema && schema.properties) || {};
  const names = Object.keys(props);
  // What the person is asked about, and what the run last saw (a screenshot).
  const seen = imageBlobs(state.values).slice(-1).map(blobImage);
  const form = h("form", { class: "answer panel" }, h("h2", { text: `Waiting at ${node}` }), h("pre", { text: show(interrupt.value) }), ...seen);
  // One yes-or-no property (`confirmed`): Yes and No buttons, the other fields beside
  // them filled from the payload where it has them (the `reference` being answered).
  const flags = names.filter((n) => props[n].type === "boolean");
  if (flags.length === 1) {
    const flag = flags[0];
    const rest = names.filter((n) => n !== flag);
    const others = h("div", {}, schemaFields({ properties: Object.fromEntries(rest.map((n) => [n, props[n]])), required: (schema.required || []).filter((n) => n !== flag) }));
    for (const el of others.querySelectorAll("[data-type]")) {
      const given = interrupt.value && typeof interrupt.value === "object" ? interrupt.value[el.name] : undefined;
      if (given !== undefined && given !== null) el.value = typeof given === "string" ? given : JSON.stringify(given);
    }
    form.append(
      others,
      h(
        "div",
        { class: "row" },
        h("button", { type: "button", onclick: () => submit({ ...fieldValues(others), [flag]: true }), text: "Yes" }),
        h("button", { type: "button", class: "secondary", onclick: () => submit({ ...fieldValues(others), [flag]: false }), text: "No" }),
      ),
    );
  } else if (schema) {
    form.append(...schemaFields(schema), h("div", { class: "row" }, h("button", { type: "submit", text: "Answer" })));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      submit(fieldValues(form));
    });
  } else {
    const text = h("textarea", { name: "answer", rows: 3, "aria-label": "answer" });
    form.append(text, h("div", { class: "row" }, h("button", { type: "submit", text: "Answer" })));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      let value = text.value;
      try {
        value = JSON.parse(value);
      } catch (_) {}
      submit(value);
    });
  }
  if (asked) {
    // A server's question may be declined: the server hears so and goes on its way.
    form.append(h("div", { class: "row" }, h("button", { type: "button", class: "secondary", onclick: () => submit({ action: "decline" }), text: "Decline" })));
  }
  form.append(error);
  return form;
}

// ---- Threads ---------------------------------------------------------------------

async function threadsPage(turn = routes) {
  markCurrent("aside a", null, "data-graph");
  const threads = await api("POST", "/threads/search", { limit: 200, sort_by: "updated_at", sort_order: "desc" });
  const rows = threads.map((t) => {
    const outcome = t.values && t.values.outcome;
    return h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/thread/${encodeURIComponent(t.thread_id)}`, text: t.thread_id })),
      h("td", {}, h("span", { class: `badge ${threadStatus(t)}`, text: threadStatus(t) })),
      h("td", { text: (t.metadata && (t.metadata.graph_id || t.metadata.assistant_id)) || "" }),
      h("td", { text: outcome === undefined || outcome === null ? "" : show(outcome) }),
      h("td", { class: "muted", text: t.updated_at }),
    );
  });
  if (stale(turn)) return;
  $("#main").replaceChildren(
    h("h1", { text: "Threads" }),
    threads.length
      ? h("table", {}, h("thead", {}, h("tr", {}, ["Thread", "Status", "Graph", "Outcome", "Updated"].map((c) => h("th", { text: c })))), h("tbody", {}, rows))
      : h("p", { class: "muted", text: "No threads yet: start a run from a graph." }),
  );
}

/// running, paused, finished or failed, as people say it.
function threadStatus(t) {
  if (t.status === "busy") return "running";
  // Cancelled threads are `interrupted` too (as on LangGraph's server): paused only
  // when an interrupt waits.
  if (t.status === "interrupted") return Object.keys(t.interrupts || {}).length ? "paused" : "stopped";
  if (t.status === "error") return "failed";
  return t.values ? "finished" : "new";
}

async function threadPage(id, turn = routes) {
  markCurrent("aside a", null, "data-graph");
  const t = await api("GET", `/threads/${encodeURIComponent(id)}`);
  const state = await api("GET", `/threads/${encodeURIComponent(id)}/state`);
  const history = await api("GET", `/threads/${encodeURIComponent(id)}/history?limit=1000`);
  const graph = t.metadata && (t.metadata.graph_id || t.metadata.assistant_id);
  const view = h("div", { class: "panel", id: "checkpoint" }, h("h2", { text: "State" }), h("pre", { text: show(t.values) }));
  const error = h("div", { class: "error", role: "alert", hidden: true });
  const select = (row, c) => {
    for (const r of document.querySelectorAll("tr.checkpoint")) r.setAttribute("aria-selected", "false");
    row.setAttribute("aria-selected", "true");
    const failed = (err) => {
      error.textContent = err.message;
      error.hidden = false;
    };
    // Going on from an earlier checkpoint branches the thread there: the checkpoints
    // after it stay, on their own branch.
    // A checkpoint paused at an interrupt is answered from the thread's latest: a run
    // without input would stay where it is.
    const onward = graph && c.next && c.next.length && !(c.interrupts && c.interrupts.length)
      ? h("button", { type: "button", text: "Go on from here", onclick: () => {
          error.hidden = true;
          goOn({ assistant_id: graph, input: null, checkpoint_id: c.checkpoint_id }).catch(failed);
        } })
      : null;
    const copy = h("button", {
      type: "button",
      class: "secondary",
      text: "Copy to a new thread",
      onclick: async () => {
        error.hidden = true;
        try {
          const copy = await api("POST", `/threads/${encodeURIComponent(id)}/copy`, { checkpoint_id: c.checkpoint_id });
          location.hash = `#/thread/${encodeURIComponent(copy.thread_id)}`;
        } catch (err) {
          failed(err);
        }
      },
    });
    view.replaceChildren(h("h2", { text: `State at step ${c.metadata.step}` }), h("pre", { text: show(c.values) }), h("div", { class: "row" }, onward, copy), error);
  };
  // Newest first: a checkpoint that does not follow the one listed below it starts a
  // branch, from the checkpoint it names.
  const step = new Map(history.map((c) => [c.checkpoint_id, c.metadata.step]));
  const rows = history.map((c, i) => {
    const writes = c.metadata && c.metadata.writes ? Object.keys(c.metadata.writes).join(", ") : `(${(c.metadata && c.metadata.source) || "input"})`;
    const below = history[i + 1];
    const branch = c.parent_checkpoint_id && below && below.checkpoint_id !== c.parent_checkpoint_id
      ? h("span", { class: "badge branch", title: c.parent_checkpoint_id, text: `branch from step ${step.has(c.parent_checkpoint_id) ? step.get(c.parent_checkpoint_id) : "?"}` })
      : "";
    const row = h("tr", { class: "checkpoint", tabindex: "0", "aria-selected": "false", "data-checkpoint": c.checkpoint_id, "data-parent": c.parent_checkpoint_id || "" }, h("td", { text: c.metadata.step }), h("td", {}, writes, branch ? " " : "", branch), h("td", { text: c.next.join(", ") }), h("td", { class: "muted", text: c.created_at }));
    row.addEventListener("click", () => select(row, c));
    row.addEventListener("keydown", (e) => {
      if (e.key === "Enter") select(row, c);
    });
    return row;
  });
  // Going on (from a fork, a stop, an interrupt) happens on the graph's page, where
  // the drawing shows the run.
  const goOn = async (body) => {
    location.hash = `#/graph/${encodeURIComponent(graph)}`;
    await waitFor(() => $("#run") && $(".drawing"));
    const details = await api("GET", `/assistants/${encodeURIComponent(graph)}/details`);
    await watchRun($("#run"), $(".drawing"), graph, details, id, body);
  };
  const status = threadStatus(t);
  let next = null;
  if (graph && status === "paused") {
    const details = await api("GET", `/assistants/${encodeURIComponent(graph)}/details`);
    next = answerForm(state, details, (resume) => goOn({ assistant_id: graph, command: { resume } }));
  } else if (graph && status !== "running" && state.next && state.next.length) {
    next = h("div", { class: "row" }, h("button", { type: "button", text: "Go on from here", onclick: () => goOn({ assistant_id: graph, input: null }).catch((err) => {
      error.textContent = err.message;
      error.hidden = false;
    }) }));
  }
  if (stale(turn)) return;
  $("#main").replaceChildren(
    h("h1", {}, `Thread ${id} `, h("span", { class: `badge ${status}`, text: status })),
    h("p", { class: "muted" }, graph ? h("a", { href: `#/graph/${encodeURIComponent(graph)}`, text: `graph ${graph}` }) : "", " "),
    next,
    h("div", { class: "columns" }, h("div", {}, h("h2", { text: "History" }), h("table", {}, h("thead", {}, h("tr", {}, ["Step", "Wrote", "Next", "At"].map((c) => h("th", { text: c })))), h("tbody", {}, rows))), view),
  );
}

async function waitFor(ready) {
  for (let i = 0; i < 100; i++) {
    if (ready()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

// ---- Routing ---------------------------------------------------------------------

async function route() {
  const turn = ++routes;
  const hash = location.hash || "#/";
  const [, page, arg] = hash.match(/^#\/([^/]*)\/?(.*)$/) || [];
  markCurrent("nav a", page === "threads" || page === "thread" ? "nav-threads" : "nav-graphs", "id");
  try {
    await loadGraphs();
    if (page === "graph" && arg) await graphPage(decodeURIComponent(arg), turn);
    else if (page === "threads") await threadsPage(turn);
    else if (page === "thread" && arg) await threadPage(decodeURIComponent(arg), turn);
    else if (graphs.length) await graphPage(graphs[0].graph_id, turn);
    else $("#main").replaceChildren(h("p", { text: "No graphs are served." }));
  } catch (err) {
    if (!stale(turn)) $("#main").replaceChildren(h("div", { class: "error", role: "alert", text: err.message }));
  }
  // Says which route the page shows, once it shows it (tests wait for it).
  if (!stale(turn)) document.body.dataset.shown = hash;
}

window.addEventListener("hashchange", route);
route();
