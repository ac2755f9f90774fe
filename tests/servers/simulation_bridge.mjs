#!/usr/bin/env node
// A stand-in for seed 003's MCP bridge to a pharmacokinetic simulation service, for
// graphs/confirm_execute.toml and its tests. It speaks MCP over stdio (the official SDK)
// and offers the bridge's tools:
//
//   load_simulation     { model_path }                                  critical
//   list_parameters     { simulation_id }                               read-only
//   set_parameter_value { simulation_id, parameter_path, value, unit }  critical
//   run_simulation      { simulation_id }                               critical
//   get_results         { simulation_id }                               read-only
//
// The service's state lives in a JSON file, so it survives the server being restarted
// (a paused run stops its servers; a crashed server is started again):
//
//   SIMULATION_BRIDGE_STATE   path of the state file (default
//                             `.switchyard/simulation_bridge.json` under the working
//                             directory). It also logs every call the service received:
//                             `calls: [{ tool, arguments, at_ms, outcome }]`.
//   SIMULATION_BRIDGE_FAULTS  failures to inject, as JSON: `{"run_simulation": 2}` makes
//                             the next 2 calls of run_simulation fail transiently: the
//                             process exits without answering, as a bridge whose upstream
//                             dropped the connection (a 502). Read once, when the state
//                             file is created; each failure is used up when it happens.
//
// Results are deterministic: a one-compartment model with AUC = dose / clearance,
// Cmax = dose / volume and t½ = ln 2 · volume / clearance.

import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import fs from "node:fs";
import path from "node:path";

const STATE_FILE = process.env.SIMULATION_BRIDGE_STATE || ".switchyard/simulation_bridge.json";

/// The model files the service knows, with their parameters.
const MODELS = {
  "models/warfarin.pkml": [
    { path: "Applications|Dose", value: 5, unit: "mg" },
    { path: "Liver|Clearance", value: 0.2, unit: "L/h" },
    { path: "Organism|Volume", value: 10, unit: "L" },
  ],
  "models/midazolam.pkml": [
    { path: "Applications|Dose", value: 7.5, unit: "mg" },
    { path: "Liver|Clearance", value: 25, unit: "L/h" },
    { path: "Organism|Volume", value: 70, unit: "L" },
  ],
};

const SIMULATION_ID = {
  type: "string",
  description: "The simulation's id, as load_simulation returned it (e.g. `sim-1`).",
};

const TOOLS = [
  {
    name: "load_simulation",
    description: "Load a simulation model file into the service; returns the new simulation's id and parameters.",
    inputSchema: {
      type: "object",
      properties: { model_path: { type: "string", description: "Path of the model file, e.g. `models/warfarin.pkml`." } },
      required: ["model_path"],
      additionalProperties: false,
    },
  },
  {
    name: "list_parameters",
    description: "List a simulation's parameters with their paths, values and units.",
    inputSchema: {
      type: "object",
      properties: { simulation_id: SIMULATION_ID },
      required: ["simulation_id"],
      additionalProperties: false,
    },
  },
  {
    name: "set_parameter_value",
    description: "Set one parameter of a simulation to a new value.",
    inputSchema: {
      type: "object",
      properties: {
        simulation_id: SIMULATION_ID,
        parameter_path: { type: "string", description: "The parameter's path, as list_parameters shows it." },
        value: { type: "number", description: "The new value." },
        unit: { type: ["string", "null"], description: "Unit of the value; null for the parameter's own unit." },
      },
      required: ["simulation_id", "parameter_path", "value", "unit"],
      additionalProperties: false,
    },
  },
  {
    name: "run_simulation",
    description: "Run a simulation with its current parameters (compute-intensive).",
    inputSchema: {
      type: "object",
      properties: { simulation_id: SIMULATION_ID },
      required: ["simulation_id"],
      additionalProperties: false,
    },
  },
  {
    name: "get_results",
    description: "Get the results of a simulation's latest run.",
    inputSchema: {
      type: "object",
      properties: { simulation_id: SIMULATION_ID },
      required: ["simulation_id"],
      additionalProperties: false,
    },
  },
];

function loadState() {
  if (fs.existsSync(STATE_FILE)) {
    return JSON.parse(fs.readFileSync(STATE_FILE, "utf8"));
  }
  const faults = process.env.SIMULATION_BRIDGE_FAULTS ? JSON.parse(process.env.SIMULATION_BRIDGE_FAULTS) : {};
  return { next_simulation: 1, next_run: 1, simulations: {}, faults, calls: [] };
}

function saveState(state) {
  fs.mkdirSync(path.dirname(path.resolve(STATE_FILE)), { recursive: true });
  const tmp = `${STATE_FILE}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(state, null, 2));
  fs.renameSync(tmp, STATE_FILE);
}

class ToolFailure extends Error {}

function simulation(state, id) {
  const sim = state.simulations[id];
  if (!sim) {
    const known = Object.keys(state.simulations);
    throw new ToolFailure(
      `no simulation \`${id}\`; ${known.length ? `loaded: ${known.join(", ")}` : "load one with load_simulation first"}`,
    );
  }
  return sim;
}

const round = (x) => Math.round(x * 1000) / 1000;

function parameter(sim, p) {
  return sim.parameters.find((q) => q.path === p).value;
}

const HANDLERS = {
  load_simulation(state, { model_path }) {
    const parameters = MODELS[model_path];
    if (!parameters) {
      throw new ToolFailure(`model file \`${model_path}\` not found; available: ${Object.keys(MODELS).join(", ")}`);
    }
    const id = `sim-${state.next_simulation++}`;
    state.simulations[id] = { model_path, parameters: structuredClone(parameters), runs: [] };
    return { simulation_id: id, model_path, parameters: parameters.length };
  },
  list_parameters(state, { simulation_id }) {
    return { simulation_id, parameters: simulation(state, simulation_id).parameters };
  },
  set_parameter_value(state, { simulation_id, parameter_path, value, unit }) {
    const sim = simulation(state, simulation_id);
    const p = sim.parameters.find((q) => q.path === parameter_path);
    if (!p) {
      throw new ToolFailure(
        `simulation \`${simulation_id}\` has no parameter \`${parameter_path}\`; it has ${sim.parameters.map((q) => q.path).join(", ")}`,
      );
    }
    if (unit !== null && unit !== undefined && unit !== p.unit) {
      throw new ToolFailure(`\`${parameter_path}\` is in ${p.unit}, not ${unit}`);
    }
    if (!(value > 0)) {
      throw new ToolFailure(`\`${parameter_path}\` must be positive, got ${value}`);
    }
    const old_value = p.value;
    p.value = value;
    return { simulation_id, parameter_path, old_value, value, unit: p.unit };
  },
  run_simulation(state, { simulation_id }) {
    const sim = simulation(state, simulation_id);
    const dose = parameter(sim, "Applications|Dose");
    const cl = parameter(sim, "Liver|Clearance");
    const v = parameter(sim, "Organism|Volume");
    const run_id = `run-${state.next_run++}`;
    sim.runs.push({
      run_id,
      auc: round(dose / cl),
      cmax: round(dose / v),
      half_life: round((Math.LN2 * v) / cl),
      units: { auc: "mg*h/L", cmax: "mg/L", half_life: "h" },
    });
    return { simulation_id, run_id, status: "completed" };
  },
  get_results(state, { simulation_id }) {
    const sim = simulation(state, simulation_id);
    const last = sim.runs[sim.runs.length - 1];
    if (!last) {
      throw new ToolFailure(`simulation \`${simulation_id}\` has not been run yet; call run_simulation first`);
    }
    return { simulation_id, ...last };
  },
};

const server = new Server({ name: "simulation-bridge", version: "1.0.0" }, { capabilities: { tools: {} } });

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, arguments: args = {} } = request.params;
  const state = loadState();
  const call = { tool: name, arguments: args, at_ms: Date.now() };
  state.calls.push(call);
  if ((state.faults[name] ?? 0) > 0) {
    state.faults[name] -= 1;
    call.outcome = "crash";
    saveState(state);
    // Silently: a client quotes a dead server's last stderr lines in its error, and the
    // error goes to the planner, whose requests a replay must see unchanged.
    process.exit(75);
  }
  const handler = HANDLERS[name];
  try {
    if (!handler) {
      throw new ToolFailure(`unknown tool \`${name}\``);
    }
    const result = handler(state, args);
    call.outcome = "ok";
    saveState(state);
    return { content: [{ type: "text", text: JSON.stringify(result) }] };
  } catch (e) {
    if (!(e instanceof ToolFailure)) {
      throw e;
    }
    call.outcome = "error";
    saveState(state);
    return { content: [{ type: "text", text: e.message }], isError: true };
  }
});

await server.connect(new StdioServerTransport());
