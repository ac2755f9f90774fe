// The web page in a real browser: Playwright from npm driving Debian's chromium (no
// browser download) against the `switchyard serve` the Rust test started at $API_URL,
// serving tests/fixtures/ui (approve.toml) and a directory $BROKEN_DIR where the test
// breaks a graph. Prints what it saw, one JSON line per step; screenshots go to
// $SHOTS.
import { open, say, shots, url } from "./browser.mjs";

const { browser, context, page, problems } = await open(15000);
// Opens a route of the page and waits until the page shows it (not an earlier one).
const go = async (hash) => {
  await page.goto(`${url}/${hash}`);
  await page.waitForFunction((h) => document.body.dataset.shown === h, hash || "#/");
};

try {
  // The graphs, with their status.
  await go("");
  await page.waitForSelector("aside li");
  const listed = await page.$$eval("aside li a", (as) => as.map((a) => a.textContent));
  say("graphs", { listed });

  // The drawing, and a node's details on selection (by keyboard).
  await go("#/graph/approve");
  await page.waitForSelector(".drawing svg .node[data-node=confirm]");
  const nodes = await page.$$eval(".drawing .node", (ns) => ns.map((n) => `${n.dataset.node}:${n.getAttribute("class")}`));
  say("drawing", { nodes });
  await page.focus(".drawing .node[data-node=confirm]");
  await page.keyboard.press("Enter");
  const details = await page.textContent("#node-details");
  say("details", { details: details.replace(/\s+/g, " ").trim() });

  // A run from the form: it counts, then waits at confirm, highlighted there.
  await page.fill("form.inputs input[name=budget]", "3");
  await page.click("text=Start run");
  await page.waitForSelector("form.answer");
  const current = await page.$$eval(".drawing .node.current", (ns) => ns.map((n) => n.dataset.node));
  const visited = await page.$$eval(".drawing .node.visited", (ns) => ns.map((n) => n.dataset.node));
  const taken = await page.$$eval(".drawing .edge.taken", (es) => es.map((e) => `${e.dataset.from}->${e.dataset.to}`));
  const steps = await page.$$eval("ol.steps > li", (ls) => ls.map((l) => l.innerText.replace(/\s+/g, " ").trim()));
  const status = await page.textContent("#run-status");
  const waiting = await page.textContent("form.answer");
  say("paused", { current, visited, taken, steps, status, waiting: waiting.replace(/\s+/g, " ").trim() });
  await page.screenshot({ path: `${shots}/paused.png`, fullPage: true });

  // Answered by a click: it goes on to its end.
  await page.click("form.answer >> text=Yes");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "success");
  const after = await page.$$eval("ol.steps > li", (ls) => ls.map((l) => l.dataset.node));
  const end = await page.$$eval(".drawing .node.visited", (ns) => ns.map((n) => n.dataset.node));
  say("answered", { steps: after, visited: end });

  // Threads: the run's thread, finished; its history; the state at an earlier step.
  await page.click("#nav-threads");
  await page.waitForFunction(() => document.body.dataset.shown === "#/threads");
  await page.waitForSelector("table tbody tr");
  const threads = await page.$$eval("table tbody tr", (rs) => rs.map((r) => [...r.children].slice(1, 3).map((c) => c.textContent)));
  say("threads", { threads });
  await page.click("table tbody tr a");
  await page.waitForSelector("tr.checkpoint");
  const history = await page.$$eval("tr.checkpoint", (rs) => rs.map((r) => [...r.children].slice(0, 3).map((c) => c.textContent).join(" | ")));
  say("history", { history });
  await page.click("tr.checkpoint:has(td:text-is('1'))");
  const earlier = await page.textContent("#checkpoint pre");
  say("time travel", { state: JSON.parse(earlier) });

  // A copy up to there, gone on with: it counts again and pauses; "No" this time.
  const original = await page.evaluate(() => location.hash);
  await page.click("text=Copy to a new thread");
  await page.waitForFunction((was) => location.hash !== was && document.querySelectorAll("tr.checkpoint").length === 3, original);
  const forked = await page.$$eval("tr.checkpoint", (rs) => rs.length);
  await page.click("text=Go on from here");
  await page.waitForSelector("form.answer");
  const again = await page.$$eval("ol.steps > li", (ls) => ls.map((l) => l.dataset.node));
  await page.click("form.answer >> text=No");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "success");
  const kept = await page.$$eval(".drawing .node.visited", (ns) => ns.map((n) => n.dataset.node));
  say("fork", { checkpoints: forked, steps: again, visited: kept });

  // On the thread itself: going on from step 1 branches it there, and the first
  // branch stays in its history.
  await go(original);
  await page.waitForSelector("tr.checkpoint");
  await page.click("tr.checkpoint:has(td:text-is('1'))");
  await page.click("#checkpoint >> text=Go on from here");
  await page.waitForSelector("form.answer");
  await page.click("form.answer >> text=No");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "success");
  await go(original);
  await page.waitForSelector("tr.checkpoint .badge.branch");
  const branched = await page.$$eval("tr.checkpoint", (rs) => rs.map((r) => [...r.children].slice(0, 3).map((c) => c.textContent).join(" | ")));
  say("branch", { history: branched });

  // A step limit from the form: the run ends when it is reached.
  await go("#/graph/approve");
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.shown === "#/graph/approve");
  await page.fill("form.inputs input[name=budget]", "100");
  await page.fill("form.inputs input[name=max_steps]", "4");
  await page.click("text=Start run");
  await page.waitForFunction(() => {
    const s = document.querySelector("#run-status");
    return s && s.textContent !== "running";
  });
  const limited = await page.$$eval("ol.steps > li", (ls) => ls.map((l) => l.innerText.replace(/\s+/g, " ").trim()));
  say("max steps", { status: await page.textContent("#run-status"), steps: limited });

  // The stop button: a run that would count for ever ends where it was stopped. The
  // page's CPU is slowed fourfold, as on a loaded CI machine: a page that read the
  // stream without handing the thread back never answered the click there, and one
  // that drew every step fell so far behind that it said "running" long after the stop.
  await go("#/graph/spin");
  const cdp = await context.newCDPSession(page);
  await cdp.send("Emulation.setCPUThrottlingRate", { rate: 4 });
  await page.click("text=Start run");
  await page.waitForSelector("ol.steps > li");
  await page.click("#run button.danger");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent !== "running");
  await cdp.send("Emulation.setCPUThrottlingRate", { rate: 1 });
  // The run makes steps faster than a page can list them: the page lists the last 200
  // and counts the rest, so it stays small enough to answer the click.
  const shown = await page.$$eval("ol.steps > li", (ls) => ls.length);
  const counted = await page.$eval("#run p.earlier", (p) => (p.hidden ? "" : p.textContent));
  say("stopped", {
    status: await page.textContent("#run-status"),
    disabled: await page.$eval("#run button.danger", (b) => b.disabled),
    // Fewer than 200 only if the stop beat the run, and then nothing is said hidden.
    capped: shown < 200 ? counted === "" : shown === 200 && /^\d+ earlier steps? not shown$/.test(counted) ? true : `${shown} listed, "${counted}"`,
  });

  // A graph whose edit broke it: its diagnostics on the page.
  await go("#/graph/broken");
  await page.waitForSelector("pre.diagnostics");
  const diagnostics = await page.textContent("pre.diagnostics");
  const badge = await page.textContent("aside a[data-graph=broken] .badge");
  say("broken", { badge, diagnostics });
  await page.screenshot({ path: `${shots}/broken.png`, fullPage: true });

  // A phone's width: still one column, nothing cut off sideways.
  await page.setViewportSize({ width: 390, height: 844 });
  await go("#/graph/approve");
  await page.waitForSelector(".drawing svg");
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  say("phone", { overflow });
  await page.screenshot({ path: `${shots}/phone.png`, fullPage: true });
} finally {
  say("console", { problems });
  await browser.close();
}
