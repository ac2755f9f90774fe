// Seed 000's browser agent from the web page: Playwright from npm driving Debian's
// chromium against the `switchyard serve` at $API_URL (the model's answers scripted by
// the Rust test). The run is started from the form with $GOAL, pauses at the
// confirmation of the click that sends the form, a wrong answer is refused and the
// thread stays paused, then "Yes" sends it. One JSON line per step.
import { open, say, shots, url } from "./browser.mjs";

const { browser, page, problems } = await open(60000);

try {
  await page.goto(url + "/#/graph/browser_agent");
  await page.waitForFunction(() => document.body.dataset.shown === "#/graph/browser_agent");
  await page.fill("form.inputs input[name=user_message]", process.env.GOAL);
  await page.click("text=Start run");
  await page.waitForSelector("form.answer");
  const current = await page.$$eval(".drawing .node.current", (ns) => ns.map((n) => n.dataset.node));
  const payload = JSON.parse(await page.textContent("form.answer pre"));
  const reference = await page.inputValue("form.answer input[name=reference]");
  // The page the run last saw, from the blob store, beside the question.
  await page.waitForFunction(() => {
    const img = document.querySelector("form.answer img.shot");
    return img && img.complete && img.naturalWidth > 0;
  });
  const screenshot = await page.$eval("form.answer img.shot", (img) => img.naturalWidth > 100 && img.dataset.blob.startsWith("sha256:"));
  const stepShots = await page.$$eval("ol.steps img.shot", (imgs) => imgs.length > 0);
  // Each model call with what it was sent and what it answered.
  const calls = await page.$$eval("ol.steps details.reply pre", (ps) => ps.map((p) => JSON.parse(p.textContent).kind));
  const prompts = await page.$$eval("ol.steps details.prompt pre", (ps) => ps.map((p) => p.textContent.startsWith("system: ")));
  say("model", { replies: calls, promptsStartWithSystem: prompts });
  say("paused", { current, kind: payload.kind, reference, status: await page.textContent("#run-status"), screenshot, stepShots });
  await page.screenshot({ path: `${shots}/seed-000-confirm.png`, fullPage: true });

  // An answer to another action: refused, said why, and the thread waits still.
  await page.fill("form.answer input[name=reference]", "a9");
  await page.click("form.answer >> text=Yes");
  await page.waitForSelector("#run div.error[role=alert]:not([hidden])");
  const refused = await page.textContent("#run div.error[role=alert]:not([hidden])");
  await page.waitForSelector("form.answer input[name=reference]");
  say("refused", { error: refused, status: await page.textContent("#run-status"), reference: await page.inputValue("form.answer input[name=reference]") });

  await page.click("form.answer >> text=Yes");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "success");
  const visited = await page.$$eval(".drawing .node.visited", (ns) => ns.map((n) => n.dataset.node));
  const last = await page.$$eval("ol.steps > li", (ls) => ls.slice(-3).map((l) => l.dataset.node));
  say("confirmed", { confirmedVisited: visited.includes("confirm_interrupt"), last });
} finally {
  say("console", { problems });
  await browser.close();
}
