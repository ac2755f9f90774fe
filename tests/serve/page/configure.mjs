// A graph with `[graph] input` and `[configurable]` values: the page's run form lists
// only its inputs, and its configuration (a choice for a string with `one_of`, a number
// for an int); a run started with a chosen greeting answers with it. One JSON line per
// step.
import { open, say, shots, url } from "./browser.mjs";

const { browser, page, problems } = await open(60000);

try {
  await page.goto(url + "/#/graph/greet");
  await page.waitForFunction(() => document.body.dataset.shown === "#/graph/greet");
  const inputs = await page.$$eval("form.inputs > div [data-type]", (els) => els.map((e) => `${e.name}:${e.dataset.type}`));
  const config = await page.$$eval("form.inputs fieldset.config [data-type]", (els) => els.map((e) => `${e.tagName.toLowerCase()} ${e.name}:${e.dataset.type}`));
  const choices = await page.$$eval("fieldset.config select[name=GREETING] option", (os) => os.map((o) => o.textContent));
  say("form", { inputs, config, choices });
  await page.fill("form.inputs input[name=question]", "how are you?");
  await page.selectOption("fieldset.config select[name=GREETING]", "Yo");
  await page.fill("fieldset.config input[name=MAX_STEPS]", "3");
  await page.click("text=Start run");
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent === "success");
  await page.screenshot({ path: `${shots}/configured-run.png`, fullPage: true });
  const writes = await page.$$eval("ol.steps ul.writes li", (ls) => ls.map((l) => l.textContent));
  say("done", { writes });
} finally {
  say("console", { problems });
  await browser.close();
}
