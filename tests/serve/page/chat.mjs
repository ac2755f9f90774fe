// A chat page written as LangGraph front ends are (tests/serve/chat_page: React and
// `useStream` from LangGraph's React SDK, bundled here with esbuild from npm), served
// on 127.0.0.1 by this script, driven by Playwright in Debian's chromium against the
// `switchyard serve` at $API_URL hosting graphs/chat_agent.toml. The Rust test scripts
// the model's answers in the order these steps ask for them. One JSON line a step.
import { build } from "esbuild";
import { createServer } from "node:http";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { open, say, shots, url } from "./browser.mjs";

// The page's bundle, built from npm's packages.
const source = "tests/serve/chat_page";
const out = process.env.PAGE_DIR;
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(source, "app.jsx")],
  bundle: true,
  jsx: "automatic",
  minify: true,
  outfile: join(out, "app.js"),
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "error",
});
const files = {
  "/": ["text/html", readFileSync(join(source, "index.html"))],
  "/app.js": ["text/javascript", readFileSync(join(out, "app.js"))],
};
const site = createServer((req, res) => {
  const [type, body] = files[req.url.split("?")[0]] ?? [];
  if (!body) return res.writeHead(404).end();
  res.writeHead(200, { "content-type": type }).end(body);
});
await new Promise((ok) => site.listen(0, "127.0.0.1", ok));
const page_url = `http://127.0.0.1:${site.address().port}/?api=${encodeURIComponent(url)}`;

const { browser, page, problems } = await open(20000);
// The conversation as shown: each message's kind, text, branch and calls.
const shown = () =>
  page.$$eval("#messages .msg", (ms) =>
    ms.map((m) => {
      const kind = m.classList[1];
      const text = m.querySelector(".text")?.textContent ?? "";
      const branch = m.querySelector(".branch")?.textContent;
      const calls = [...m.querySelectorAll(".call")].map((c) => c.textContent);
      return [kind, text, ...(branch ? [`branch ${branch}`] : []), ...calls].join(" | ");
    }),
  );
const ready = () => page.waitForFunction(() => document.querySelector("#status")?.textContent === "ready");
// Waits until the last message is an AI message with this text, the run over.
const answered = async (text) => {
  await page.waitForFunction((t) => {
    const ai = [...document.querySelectorAll("#messages .msg")].pop();
    return ai?.classList.contains("ai") && ai.querySelector(".text").textContent === t;
  }, text);
  await ready();
};
const send = async (text) => {
  await page.fill("#input", text);
  await page.click("#send");
};
// Every text the last AI bubble showed, as the page drew it.
const watch = () =>
  page.evaluate(() => {
    window.seen = [];
    new MutationObserver(() => {
      const ai = [...document.querySelectorAll("#messages .msg.ai .text")].pop();
      const t = ai?.textContent;
      if (t !== undefined && window.seen[window.seen.length - 1] !== t) window.seen.push(t);
    }).observe(document.querySelector("#messages"), { subtree: true, childList: true, characterData: true });
  });

try {
  await page.goto(page_url);
  await page.waitForSelector("#composer");

  // 1. The reply streams in as text.
  await watch();
  await send("Hello");
  await answered("Hello! I can read the files in your workspace, and I ask before I write one.");
  say("streamed", { seen: await page.evaluate(() => window.seen), shown: await shown() });

  // 2. A write asks for approval, once, under the last message; approved, it is made.
  await send("Save 'Friday' to plan.txt");
  await page.waitForSelector(".approval");
  say("approval", {
    cards: await page.$$eval(".approval", (a) => a.map((c) => c.querySelector(".what").textContent)),
    under: await page.$eval(".approval", (c) => c.closest(".msg").dataset.id === [...document.querySelectorAll("#messages .msg")].pop().dataset.id),
  });
  await page.click(".approval .approve");
  await answered("Saved plan.txt.");
  say("approved", { cards: await page.$$(".approval").then((a) => a.length), shown: await shown() });

  // 3. A message typed while the approval waits: a new run, the approval dropped.
  await send("Write 'x' to other.txt");
  await page.waitForSelector(".approval");
  await send("No, leave it.");
  await answered("Then I will not write it.");
  say("while paused", { cards: await page.$$(".approval").then((a) => a.length), shown: await shown() });

  // 4. Stop mid-reply, then a new message at once (the server queues it behind the
  // cancelled run).
  await send("Tell me a story.");
  await page.waitForFunction(() => {
    const ai = [...document.querySelectorAll("#messages .msg")].pop();
    return ai?.classList.contains("ai") && ai.querySelector(".text").textContent.startsWith("Once upon");
  });
  await page.click("#stop");
  await send("Just say hi.");
  await answered("Hi.");
  say("stopped", { shown: await shown() });
  await page.screenshot({ path: `${shots}/chat-stopped.png`, fullPage: true });

  // 5. Regenerate the last answer: branch 2 of 2; the arrows go back to the first.
  await page.click("#messages .msg.ai:last-child .regenerate");
  await answered("Hello there.");
  say("regenerated", { shown: await shown() });
  await page.click("#messages .msg.ai:last-child .prev");
  await answered("Hi.");
  say("first branch", { shown: await shown() });
  await page.click("#messages .msg.ai:last-child .next");
  await answered("Hello there.");

  // 6. Edit an earlier message: the thread forks before it.
  const id = await page.locator("#messages .msg.human", { hasText: "Just say hi." }).getAttribute("data-id");
  const human = page.locator(`#messages .msg[data-id="${id}"]`);
  await human.locator(".edit").click();
  await human.locator(".edit-text").fill("Just say bye.");
  await human.locator(".save").click();
  await answered("Bye.");
  say("edited", { shown: await shown() });
  await page.screenshot({ path: `${shots}/chat-edited.png`, fullPage: true });

  // 7. An image goes with a message.
  await page.setInputFiles("#file", {
    name: "dot.png",
    mimeType: "image/png",
    buffer: Buffer.from(process.env.IMAGE_BASE64, "base64"),
  });
  await send("What is this?");
  await answered("A red dot.");

  // 8. A reload shows the same conversation, from the server.
  const before = await shown();
  const thread = new URL(page.url()).searchParams.get("thread");
  await page.reload();
  await answered("A red dot.");
  say("reloaded", { thread, same: JSON.stringify(await shown()) === JSON.stringify(before), shown: await shown() });
  say("problems", { problems });
} catch (e) {
  await page.screenshot({ path: `${shots}/chat-failed.png`, fullPage: true });
  say("failed", { error: String(e), shown: await shown().catch(() => []), problems });
  process.exitCode = 1;
} finally {
  await browser.close();
  site.close();
}
