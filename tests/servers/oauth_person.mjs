// A streamable-HTTP MCP server behind an OAuth authorization server that wants a
// person to sign in: its authorization endpoint answers with a sign-in page, and only
// `GET /approve?state=...` (the person's click) sends the browser back with a code
// (`/deny?state=...` with `error=access_denied`). Dynamic registration, PKCE (S256)
// checked at the token endpoint, one token. The MCP endpoint wants that token; its
// one tool, `whoami`, names the person. Listens on 127.0.0.1:$PORT; stateless.
import http from "node:http";
import { createHash, randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const port = Number(process.env.PORT);
const base = `http://127.0.0.1:${port}`;
const TOKEN = `tok-person-${randomUUID()}`;
const asked = new Map(); // state -> the authorization request's query
const codes = new Map(); // code -> its code_challenge

function mcp() {
  const s = new Server({ name: "oauth-person", version: "1.0.0" }, { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: "whoami", description: "Who signed in.", inputSchema: { type: "object", properties: {} } }],
  }));
  s.setRequestHandler(CallToolRequestSchema, async () => ({
    content: [{ type: "text", text: JSON.stringify({ user: "ada" }) }],
  }));
  return s;
}

function json(res, status, body, headers = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function body(req) {
  return new Promise((resolve) => {
    let text = "";
    req.on("data", (c) => (text += c));
    req.on("end", () => resolve(text));
  });
}

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
        grant_types_supported: ["authorization_code"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none"],
      });
    }
    if (url.pathname === "/register" && req.method === "POST") {
      const asked = JSON.parse(await body(req));
      return json(res, 201, { ...asked, client_id: "person-client", token_endpoint_auth_method: "none" });
    }
    if (url.pathname === "/authorize") {
      const state = url.searchParams.get("state") ?? "";
      asked.set(state, url.searchParams);
      const hidden = state.replace(/[^A-Za-z0-9_-]/g, "");
      res.writeHead(200, { "content-type": "text/html" });
      return res.end(
        `<!doctype html><title>Sign in</title><form action=/approve><input type=hidden name=state value="${hidden}"><button>Sign in as Ada</button></form>`,
      );
    }
    if (url.pathname === "/approve" || url.pathname === "/deny") {
      const q = asked.get(url.searchParams.get("state"));
      if (!q) return json(res, 400, { error: "unknown state" });
      const back = new URL(q.get("redirect_uri"));
      back.searchParams.set("state", q.get("state"));
      if (url.pathname === "/approve") {
        const code = randomUUID();
        codes.set(code, q.get("code_challenge"));
        back.searchParams.set("code", code);
      } else {
        back.searchParams.set("error", "access_denied");
        back.searchParams.set("error_description", "Ada said no");
      }
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (url.pathname === "/token" && req.method === "POST") {
      const form = new URLSearchParams(await body(req));
      const challenge = codes.get(form.get("code"));
      const verifier = form.get("code_verifier") ?? "";
      const made = createHash("sha256").update(verifier).digest("base64url");
      if (!challenge || made !== challenge) return json(res, 400, { error: "invalid_grant" });
      codes.delete(form.get("code"));
      return json(res, 200, { access_token: TOKEN, token_type: "Bearer", expires_in: 3600 });
    }
    if (url.pathname === "/mcp") {
      if (req.headers.authorization !== `Bearer ${TOKEN}`) {
        return json(res, 401, { error: "invalid_token" }, {
          "www-authenticate": `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
        });
      }
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on("close", () => transport.close());
      await mcp().connect(transport);
      return transport.handleRequest(req, res);
    }
    json(res, 404, { error: "not found" });
  })
  .listen(port, "127.0.0.1");
