// An MCP server and its authorization server in one process, both wanting DPoP
// (RFC 9449): tokens are bound to the client's key and every request must carry a
// fresh, valid proof of it (its method, URL, the token's hash). To show what a client
// does over a token's life:
// - the first token (`at-1`) is taken for 3 requests to /mcp, then refused as
//   expired (401 `invalid_token`): the client refreshes it with a proof;
// - the first sign-in is asked for scope `read` (the 401's challenge says so); the
//   tool `write` wants `write` too (403 `insufficient_scope`): the client signs in
//   again for the wider scope.
// Every token request and every request to /mcp is logged as a JSON line to the file
// $LOG (`{"at": "token"|"mcp", ...}`), with whether its proof was valid. Listens on
// 127.0.0.1:$PORT; stateless MCP (a transport per request).
import http from "node:http";
import crypto from "node:crypto";
import fs from "node:fs";
import * as jose from "jose";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const port = Number(process.env.PORT);
const base = `http://127.0.0.1:${port}`;
const tokens = new Map(); // access token -> { scope, uses, jkt }
let issued = 0;
const log = (line) => fs.appendFileSync(process.env.LOG, `${JSON.stringify(line)}\n`);

// A proof's problems for `method` and `url` (and the token it goes with), or none.
async function check(proof, method, url, token) {
  if (!proof) return { error: "no proof" };
  try {
    const header = jose.decodeProtectedHeader(proof);
    if (header.typ !== "dpop+jwt" || header.alg !== "ES256" || !header.jwk || header.jwk.d) {
      return { error: "bad header" };
    }
    const key = await jose.importJWK(header.jwk, "ES256");
    const { payload } = await jose.jwtVerify(proof, key);
    if (payload.htm !== method || payload.htu !== url) return { error: `htm/htu ${payload.htm} ${payload.htu}` };
    if (token) {
      const ath = crypto.createHash("sha256").update(token).digest("base64url");
      if (payload.ath !== ath) return { error: "ath" };
    }
    return { jkt: await jose.calculateJwkThumbprint(header.jwk) };
  } catch (e) {
    return { error: String(e) };
  }
}

function body(req) {
  return new Promise((resolve) => {
    let text = "";
    req.on("data", (c) => (text += c));
    req.on("end", () => resolve(text));
  });
}

function json(res, status, value, headers = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(value));
}

function mcp(token) {
  const s = new Server({ name: "dpop", version: "1.0.0" }, { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: "whoami", description: "The token the request came with.", inputSchema: { type: "object", properties: {} } },
      { name: "write", description: "Wants scope `write`.", inputSchema: { type: "object", properties: {} } },
    ],
  }));
  s.setRequestHandler(CallToolRequestSchema, async () => ({
    content: [{ type: "text", text: JSON.stringify({ token, scope: tokens.get(token).scope }) }],
  }));
  return s;
}

const challenge = (extra) =>
  `DPoP resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"${extra}`;

http
  .createServer(async (req, res) => {
    const url = new URL(req.url, base);
    if (url.pathname === "/.well-known/oauth-protected-resource/mcp") {
      return json(res, 200, { resource: `${base}/mcp`, authorization_servers: [base] });
    }
    if (url.pathname === "/.well-known/oauth-authorization-server") {
      return json(res, 200, {
        issuer: base,
        authorization_endpoint: `${base}/authorize`,
        token_endpoint: `${base}/token`,
        registration_endpoint: `${base}/register`,
        response_types_supported: ["code"],
        grant_types_supported: ["authorization_code", "refresh_token"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none"],
        dpop_signing_alg_values_supported: ["ES256"],
      });
    }
    if (url.pathname === "/register") {
      const asked = JSON.parse(await body(req));
      return json(res, 201, { client_id: "dpop-client", redirect_uris: asked.redirect_uris, token_endpoint_auth_method: "none" });
    }
    if (url.pathname === "/authorize") {
      const back = new URL(url.searchParams.get("redirect_uri"));
      back.searchParams.set("code", `code|${url.searchParams.get("scope") ?? ""}`);
      back.searchParams.set("state", url.searchParams.get("state"));
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (url.pathname === "/token") {
      const form = new URLSearchParams(await body(req));
      const proof = await check(req.headers.dpop, "POST", `${base}/token`);
      const grant = form.get("grant_type");
      log({ at: "token", grant, proof: proof.error ?? "valid" });
      if (proof.error) return json(res, 400, { error: "invalid_dpop_proof" });
      let scope;
      if (grant === "authorization_code") scope = form.get("code").split("|")[1];
      else if (grant === "refresh_token" && form.get("refresh_token").startsWith("rt|")) scope = form.get("refresh_token").split("|")[1];
      else return json(res, 400, { error: "invalid_grant" });
      const token = `at-${++issued}`;
      tokens.set(token, { scope, uses: 0, jkt: proof.jkt });
      return json(res, 200, { access_token: token, token_type: "DPoP", expires_in: 3600, refresh_token: `rt|${scope}`, scope });
    }
    if (url.pathname === "/mcp") {
      const [scheme, token] = (req.headers.authorization ?? "").split(" ");
      if (!token) {
        log({ at: "mcp", token: null });
        return json(res, 401, { error: "unauthorized" }, { "www-authenticate": challenge(', scope="read"') });
      }
      const proof = await check(req.headers.dpop, req.method, `${base}/mcp`, token);
      const known = tokens.get(token);
      const text = req.method === "POST" ? await body(req) : "";
      const message = text ? JSON.parse(text) : {};
      log({ at: "mcp", method: message.method ?? req.method, scheme, token, proof: proof.error ?? "valid" });
      if (scheme !== "DPoP" || proof.error || !known || known.jkt !== proof.jkt) {
        return json(res, 401, { error: "invalid_token" }, { "www-authenticate": challenge(', error="invalid_token"') });
      }
      known.uses += 1;
      if (token === "at-1" && known.uses > 3) {
        return json(res, 401, { error: "invalid_token" }, { "www-authenticate": challenge(', error="invalid_token", error_description="expired"') });
      }
      if (message.method === "tools/call" && message.params?.name === "write" && !known.scope.split(" ").includes("write")) {
        return json(res, 403, { error: "insufficient_scope" }, { "www-authenticate": challenge(', error="insufficient_scope", scope="read write"') });
      }
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on("close", () => transport.close());
      await mcp(token).connect(transport);
      return transport.handleRequest(req, res, message);
    }
    json(res, 404, { error: "not found" });
  })
  .listen(port, "127.0.0.1");
