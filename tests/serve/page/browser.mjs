// What every page script starts with: Debian's chromium driven by Playwright (no
// browser download), one page on $API_URL's server, the console's errors collected,
// and `say` printing one JSON line per step for the Rust test.
import { chromium } from "playwright-core";

export const url = process.env.API_URL;
export const shots = process.env.SHOTS;
export const say = (step, what) => console.log(JSON.stringify({ step, ...what }));

/// The browser, a context and its page, and the errors the page reports.
export async function open(timeout) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(e.message));
  page.setDefaultTimeout(timeout);
  return { browser, context, page, problems };
}
