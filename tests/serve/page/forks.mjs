// A graph whose branches run together (tests/fixtures/render/forks.toml): its drawing
// has a fork and a join bar, and after a run every edge the run took is highlighted,
// the ways through the bars included. One JSON line per step.
import { open, say, shots, url } from "./browser.mjs";

const { browser, page, problems } = await open(60000);

try {
  await page.goto(url + "/#/graph/forks");
  await page.waitForSelector(".drawing svg .node[data-node=split]");
  const bars = await page.$$eval(".drawing .bar", (bs) => bs.map((b) => b.dataset.bar));
  say("drawing", { bars });
  await page.check("form.inputs input[name=wide]");
  await page.click("text=Start run");
  await page.waitForFunction(() => document.querySelector("#run-status")?.textContent === "success");
  await page.screenshot({ path: `${shots}/forks-run.png`, fullPage: true });
  const taken = await page.$$eval(".drawing .edge.taken", (es) => es.map((e) => `${e.dataset.from}->${e.dataset.to}`).sort());
  say("taken", { taken });
} finally {
  say("console", { problems });
  await browser.close();
}
