// A run whose MCP server's authorization server wants a person: started from the page,
// whose step shows a link to the sign-in page; the person opens it (a new tab), signs
// in there, the browser goes back to Switchyard's loopback port, and the run the page
// shows goes on to its end. One JSON line per step.
import { open, say, shots, url } from "./browser.mjs";

const { browser, context, page, problems } = await open(60000);

try {
  await page.goto(url + "/#/graph/oauth_person");
  await page.waitForFunction(() => document.body.dataset.shown === "#/graph/oauth_person");
  await page.click("text=Start run");
  const link = await page.waitForSelector("ol.steps .sign-in a");
  const said = await page.textContent("ol.steps .sign-in");
  const href = await link.getAttribute("href");
  say("asked", { said, authorize: new URL(href).pathname, newTab: await link.getAttribute("target") });
  await page.screenshot({ path: `${shots}/sign-in-asked.png`, fullPage: true });

  const [signIn] = await Promise.all([context.waitForEvent("page"), link.click()]);
  await signIn.waitForSelector("text=Sign in as Ada");
  await signIn.click("text=Sign in as Ada");
  await signIn.waitForSelector("text=you can close this tab");
  const back = await signIn.textContent("body");
  say("signed in", { back, at: new URL(signIn.url()).hostname });
  await signIn.close();

  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "success");
  const writes = await page.$$eval("ol.steps ul.writes li", (ls) => ls.map((l) => l.textContent));
  say("done", { writes });
} finally {
  say("console", { problems });
  await browser.close();
}
