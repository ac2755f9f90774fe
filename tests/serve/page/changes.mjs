// A graph reloaded after an edit: its page says which version it is and lists what the
// edit changed. One JSON line per step.
import { open, say, shots, url } from "./browser.mjs";

const { browser, page, problems } = await open(60000);

try {
  await page.goto(url + "/#/graph/two_asks");
  await page.waitForFunction(() => document.body.dataset.shown === "#/graph/two_asks");
  await page.waitForSelector("details.changes");
  const summary = await page.$eval("details.changes summary", (s) => s.textContent);
  const changes = await page.$$eval("details.changes li", (ls) => ls.map((l) => l.textContent));
  await page.screenshot({ path: `${shots}/graph-changes.png`, fullPage: true });
  say("changes", { summary, changes });
} finally {
  say("console", { problems });
  await browser.close();
}
