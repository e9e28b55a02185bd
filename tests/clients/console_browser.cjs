// The web console in a real browser: Debian's chromium, headless, driven by puppeteer-core,
// against the mqrd test_console.py started (https, users admin and watcher). Logs in by
// keyboard, watches a queue's depth follow real sends, browses its messages, purges it
// through the confirmation dialog, logs out; then as watcher (browse, no manage) sees no
// purge button and gets 403 from the API with its own session. Any script error or CSP
// violation in the page fails it. Then MQTT.js's browser bundle, in a page of its own,
// sends and receives over wss:// on the same listener.
//
// usage: node console_browser.cjs HTTPS_PORT MQR_PORT MQR
"use strict";
const puppeteer = require("puppeteer-core");
const { execFileSync } = require("child_process");
const path = require("path");

const [port, mqrPort, mqr] = process.argv.slice(2);
const base = `https://localhost:${port}`;
const errors = [];

function ok(what) { console.log("ok   " + what); }
function must(cond, what) { if (!cond) throw new Error("failed: " + what); ok(what); }

async function text(page, sel) { return page.$eval(sel, (e) => e.textContent.trim()); }

async function waitText(page, sel, want, what) {
  await page.waitForFunction((s, w) => { const e = document.querySelector(s); return e && e.textContent.trim() === w; },
    { timeout: 15000 }, sel, want).catch(async () => {
    throw new Error(`${what}: ${sel} is '${await text(page, sel).catch(() => "(none)")}', not '${want}'`);
  });
  ok(what);
}

async function login(page, user, password) {
  await page.waitForSelector("#login-user", { visible: true });
  await page.click("#login-user", { clickCount: 3 });
  await page.keyboard.type(user);
  await page.focus("#login-password");
  await page.keyboard.type(password);
  await page.keyboard.press("Enter"); // the form submits by keyboard
  await page.waitForSelector("#queues-rows", { visible: true });
  await waitText(page, "#who", "user " + user, "logged in as " + user);
}

async function openQueue(page, name) {
  await page.click("#queues-search", { clickCount: 3 });
  await page.keyboard.type(name);
  const link = `#queues-rows a[href="#/queues/${name}"]`;
  await page.waitForSelector(link, { visible: true });
  // (the list refreshes each second: the link found may be replaced before it is focused;
  // focused, it keeps the focus across refreshes)
  for (let i = 0; i < 20; i++) {
    await page.focus(link).catch(() => {});
    if (await page.evaluate((l) => document.activeElement === document.querySelector(l), link)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await page.keyboard.press("Enter"); // a row's link opens the queue by keyboard
  await page.waitForSelector("#queue", { visible: true, timeout: 10000 }).catch(async (e) => {
    const where = await page.evaluate(() => location.hash + " focus=" + (document.activeElement || {}).outerHTML);
    throw new Error(e.message + " at " + where);
  });
  await waitText(page, "#queue-title", "Queue " + name, "queue " + name + " opened by keyboard");
}

async function apiStatus(page, method, path) {
  return page.evaluate(async (m, p) => {
    const s = await (await fetch("/api/v1/session", { headers: { "X-Requested-With": "t" } })).json().catch(() => ({}));
    const r = await fetch("/api/v1/" + p, { method: m, headers: { "X-Requested-With": "t", "X-CSRF-Token": s.csrf || "" } });
    return r.status;
  }, method, path);
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: "/usr/bin/chromium", headless: true, acceptInsecureCerts: true,
    args: ["--no-sandbox", "--ignore-certificate-errors", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
  });
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => errors.push("page error: " + e.message));
    page.on("console", (m) => { if (m.type() === "error" && !/status of 40[134]/.test(m.text())) errors.push(m.text()); });
    await page.goto(base + "/", { waitUntil: "networkidle0" });
    must(await page.$eval("#login", (e) => !e.hidden), "the login page, before anything else");

    await login(page, "admin", "adminpw");
    const cookie = (await page.cookies()).find((c) => c.name === "mqr_session");
    must(cookie && cookie.httpOnly && cookie.sameSite === "Strict" && cookie.secure, "session cookie HttpOnly, SameSite=Strict, Secure");
    must(await page.evaluate(() => document.cookie === ""), "the page's script cannot read the cookie");

    await page.click('button.sort[data-sort="message-count"]'); // sorted by the broker, the deepest first
    await page.waitForFunction(() => document.querySelector('button.sort[data-sort="message-count"]').getAttribute("aria-pressed") === "true");
    ok("the queues sort by depth");
    await openQueue(page, "orders");
    await waitText(page, "#stat-depth", "0", "depth 0 before the sends");
    execFileSync(mqr, ["send", "--url", `tcp://admin:adminpw@127.0.0.1:${mqrPort}`, "--count", "5", "--body", "hello from mqr", "orders"]);
    await waitText(page, "#stat-depth", "5", "depth follows 5 messages sent (live)");

    await page.click("#queue-browse");
    await page.waitForFunction(() => document.querySelectorAll("#messages-rows tr").length === 5, { timeout: 10000 });
    must((await text(page, "#messages-rows tr td.body")) === "hello from mqr", "browse shows the 5 messages and a body");

    await page.click("#act-purge");
    await page.waitForSelector("#confirm[open]", { visible: true });
    must((await text(page, "#confirm-text")).includes("Purge"), "purge asks for confirmation");
    await page.click("#confirm-ok");
    await waitText(page, "#stat-depth", "0", "purged: depth 0");

    // A queue made from the console's form (by keyboard), then deleted through its page.
    await page.evaluate(() => { location.hash = "#/queues"; });
    await page.waitForSelector("#queues", { visible: true });
    await page.click("#new-queue summary");
    await page.focus("#nq-name");
    await page.keyboard.type("made.in.console");
    await page.keyboard.press("Enter");
    await waitText(page, "#status", "Queue made.in.console created.", "a queue created from the form");
    await openQueue(page, "made.in.console");
    await page.click("#act-delete");
    await page.waitForSelector("#confirm[open]", { visible: true });
    await page.click("#confirm-ok");
    await page.waitForSelector("#queues", { visible: true });
    must((await apiStatus(page, "GET", "queues/made.in.console")) === 404, "the queue deleted after its confirmation");

    await page.click("#logout");
    await page.waitForSelector("#login-user", { visible: true });
    must((await apiStatus(page, "GET", "queues")) === 401, "after logout the API answers 401");

    await login(page, "watcher", "watchpw");
    must(await page.$eval("#nav-connections", (e) => e.hidden), "watcher sees no connections view");
    await openQueue(page, "orders");
    await waitText(page, "#stat-depth", "0", "watcher sees the queue");
    must(await page.$eval("#queue-actions", (e) => e.hidden || e.offsetParent === null), "watcher sees no purge button");
    must((await apiStatus(page, "POST", "queues/orders/purge")) === 403, "watcher's purge through the API is 403");
    must(errors.length === 0, "no script error or CSP violation in the page: " + errors.join("; "));

    // MQTT.js's browser bundle in a page of mqrd's origin (the test lets it in past the
    // console's CSP), over wss:// to the same listener.
    const blank = await browser.newPage();
    await blank.setBypassCSP(true);
    await blank.goto(base + "/", { waitUntil: "networkidle0" });
    await blank.addScriptTag({ path: path.join(process.env.NODE_PATH, "mqtt", "dist", "mqtt.min.js") });
    const got = await blank.evaluate((p) => new Promise((resolve, reject) => {
      const c = mqtt.connect(`wss://localhost:${p}`, { username: "admin", password: "adminpw", protocolVersion: 5,
        reconnectPeriod: 0, connectTimeout: 10000 });
      c.on("error", (e) => reject(String(e)));
      c.on("connect", () => c.subscribe("browser/x", { qos: 1 }, () => c.publish("browser/x", "from the browser", { qos: 1 })));
      c.on("message", (t, m) => { c.end(); resolve(t + " " + m.toString()); });
      setTimeout(() => reject("no message in 10 s"), 10000);
    }), port);
    must(got === "browser/x from the browser", "MQTT.js in the browser over wss://: a message there and back");
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e.stack || String(e)); console.error(errors.join("\n")); process.exit(1); });
