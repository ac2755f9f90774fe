// Switchyard's drawings as their real consumers see them, in Debian's Chromium driven by
// Playwright (no browser download, nothing fetched): each Mermaid text is parsed and
// rendered by Mermaid's own bundle from node_modules, and each SVG picture is laid out
// by the browser, which measures its labels and boxes.
//
// Reads a JSON list [{file, mermaid, svg}] on standard input; prints one JSON line per
// drawing: {file, mermaid: {ok, error?, nodes, bars, edges, labels}, svg: {labels,
// overlaps: [[a, b], ...]}}, where an overlap is two edge labels, or an edge label and
// a node's or a bar's box, whose boxes (as Chromium measures them) intersect.

import { createRequire } from "node:module";
import path from "node:path";

const root = process.cwd();
const require = createRequire(path.join(root, "package.json"));
const { chromium } = require("playwright-core");
const bundle = path.join(root, "node_modules/mermaid/dist/mermaid.min.js");

let input = "";
for await (const chunk of process.stdin) input += chunk;
const drawings = JSON.parse(input);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  await page.route("**/*", (route) => route.abort());
  await page.setContent("<!doctype html><html><head><meta charset=\"utf-8\"><style>body{margin:0}</style></head><body></body></html>");
  // The IIFE bundle carries DOMPurify and sets `globalThis.mermaid`.
  await page.addScriptTag({ path: bundle });
  await page.evaluate(() => mermaid.initialize({ startOnLoad: false, securityLevel: "strict", logLevel: "fatal" }));
  for (const [i, d] of drawings.entries()) {
    const result = await page.evaluate(async ({ id, text, svg }) => {
      const mermaidResult = {};
      try {
        await mermaid.parse(text);
        const drawn = await mermaid.render(id, text);
        const host = document.createElement("div");
        host.innerHTML = drawn.svg;
        const count = (s) => host.querySelectorAll(s).length;
        Object.assign(mermaidResult, {
          ok: host.querySelector("svg[aria-roledescription=error]") === null,
          nodes: count("g.node"),
          bars: [...host.querySelectorAll("g.node")].filter((g) => /-(fork|join)_/.test(g.id)).length,
          edges: count("path.flowchart-link"),
          labels: [...host.querySelectorAll("g.edgeLabel")].filter((g) => g.textContent.trim() !== "").length,
        });
      } catch (e) {
        Object.assign(mermaidResult, { ok: false, error: String(e?.message ?? e) });
      }
      // A failed render leaves its containers behind.
      for (const sel of [`#${id}`, `#d${id}`]) document.querySelectorAll(sel).forEach((e) => e.remove());

      const host = document.createElement("div");
      host.innerHTML = svg;
      document.body.appendChild(host);
      const box = (el) => el.getBoundingClientRect();
      const meets = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
      const labels = [...host.querySelectorAll("g.edge > text")].map((t) => ({
        name: `${t.textContent} (${t.parentElement.dataset.from} -> ${t.parentElement.dataset.to})`,
        box: box(t),
      }));
      const boxes = [...host.querySelectorAll("g.node > rect, g.bar > rect")].map((r) => ({
        name: r.parentElement.dataset.node ?? r.parentElement.dataset.bar,
        box: box(r),
      }));
      const overlaps = [];
      for (const [k, a] of labels.entries()) {
        for (const b of [...labels.slice(k + 1), ...boxes]) {
          if (meets(a.box, b.box)) overlaps.push([a.name, b.name]);
        }
      }
      host.remove();
      return { mermaid: mermaidResult, svg: { labels: labels.length, overlaps } };
    }, { id: `drawing${i}`, text: d.mermaid, svg: d.svg });
    console.log(JSON.stringify({ file: d.file, ...result }));
  }
} finally {
  await browser.close();
}
