// The mqrd web console: one page over the management API (/api/v1, docs/management-api.md),
// as the user who logged in (a session cookie, HttpOnly; changes carry its CSRF token).
// Views by the URL's hash (#/queues, #/queues/NAME, #/addresses, #/connections), so the
// back button and links work; every control is a button, link or input, usable by keyboard.
// Data is put in the page as text, never as HTML. The current view refreshes each second;
// a queue's chart keeps the last 5 minutes of its depth and rates.
"use strict";

const $ = (id) => document.getElementById(id);
const PAGE = 100;
const state = { csrf: null, user: null, mayManageConnections: false, sort: "", offsets: { queues: 0, addresses: 0, connections: 0 },
  last: new Map(), history: [], queue: null, timer: null, busy: false };

class ApiError extends Error {
  constructor(status, body) { super((body && body.error) || ("HTTP " + status)); this.status = status; this.body = body; }
}

async function api(method, path, body, extra) {
  const headers = { "X-Requested-With": "mqr-console" };
  if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  Object.assign(headers, extra || {});
  const r = await fetch("/api/v1/" + path, { method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

function say(text, error) {
  const s = $("status");
  s.textContent = text || "";
  s.className = error ? "error" : "";
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    if (c instanceof Node) { const td = document.createElement("td"); td.appendChild(c); tr.appendChild(td); }
    else if (Array.isArray(c)) tr.appendChild(el("td", c[0], c[1]));
    else tr.appendChild(el("td", c));
  }
  return tr;
}

// Replaces a table's rows; the link or button that had the keyboard's focus keeps it in
// the new rows (a refresh each second must not take it away).
function fill(tbody, rows, empty) {
  const a = document.activeElement;
  const key = a && tbody.contains(a) ? a.getAttribute("href") || a.getAttribute("aria-label") : null;
  tbody.replaceChildren(...rows);
  if (!rows.length) { const tr = row([empty]); tr.firstChild.colSpan = 9; tbody.appendChild(tr); }
  if (key) {
    const same = [...tbody.querySelectorAll("a, button")].find((e) => (e.getAttribute("href") || e.getAttribute("aria-label")) === key);
    if (same) same.focus();
  }
}

const num = (n) => (n === undefined || n === null ? "" : Number(n).toLocaleString("en"));
const rate = (r) => (r === null || r === undefined ? "" : r < 10 ? r.toFixed(1) : Math.round(r).toLocaleString("en"));
const enc = encodeURIComponent;

function confirmBox(text) {
  const d = $("confirm");
  $("confirm-text").textContent = text;
  return new Promise((resolve) => {
    d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
    d.returnValue = "cancel";
    d.showModal();
    $("confirm-cancel").focus();
  });
}

// ---- log in and out ----------------------------------------------------------------------

function showOnly(id) {
  for (const s of ["login", "queues", "queue", "addresses", "connections"]) $(s).hidden = s !== id;
  for (const b of document.querySelectorAll("nav button"))
    b.setAttribute("aria-current", b.dataset.view === (id === "queue" ? "queues" : id) ? "page" : "false");
}

function loggedIn(session) {
  state.user = session.user;
  state.csrf = session.csrf || null;
  state.mayManageConnections = !!session["may-manage-connections"];
  $("who").textContent = session.user ? "user " + session.user : "anonymous";
  $("logout").hidden = !session.csrf;
  $("nav").hidden = false;
  $("nav-connections").hidden = !state.mayManageConnections;
  if (!location.hash || location.hash === "#/login") location.hash = "#/queues";
  route();
}

function showLogin(text) {
  stop();
  state.csrf = null;
  $("nav").hidden = true;
  $("logout").hidden = true;
  $("who").textContent = "";
  showOnly("login");
  $("login-error").textContent = text || "";
  $("login-user").focus();
}

async function start() {
  try {
    loggedIn(await api("GET", "session"));
  } catch (e) {
    if (e.status === 401) showLogin();
    else say("mqrd did not answer: " + e.message, true);
  }
}

async function login(ev) {
  ev.preventDefault();
  const user = $("login-user").value, password = $("login-password").value;
  const bytes = new TextEncoder().encode(user + ":" + password);
  const basic = btoa(String.fromCharCode(...bytes));
  try {
    const s = await api("POST", "session", undefined, { Authorization: "Basic " + basic });
    $("login-password").value = "";
    loggedIn(Object.assign({}, s, await api("GET", "session")));
  } catch (e) {
    $("login-error").textContent = e.status === 401 ? "The user name or password is wrong."
      : e.status === 403 ? "Passwords are taken only over https." : e.message;
  }
}

async function logout() {
  try { await api("DELETE", "session"); } catch (e) { /* gone already */ }
  state.user = null;
  location.hash = "#/login";
  showLogin("Logged out.");
}

// ---- the views ---------------------------------------------------------------------------

function stop() { if (state.timer) clearInterval(state.timer); state.timer = null; }

function every(fn) {
  stop();
  const tick = async () => {
    if (state.busy) return;
    state.busy = true;
    try { await fn(); say(""); }
    catch (e) { if (e.status === 401) showLogin("Your session ended."); else say(e.message, true); }
    finally { state.busy = false; }
  };
  tick();
  state.timer = setInterval(tick, 1000);
}

function route() {
  const h = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
  if (h === "login") return;
  if (h.startsWith("queues/")) { showOnly("queue"); return openQueue(h.slice(7)); }
  if (h === "addresses") { showOnly("addresses"); return every(loadAddresses); }
  if (h === "connections" && state.mayManageConnections) { showOnly("connections"); return every(loadConnections); }
  showOnly("queues");
  every(loadQueues);
}

function pager(kind, got) {
  const o = got.offset, n = got[kind].length;
  $(kind + "-range").textContent = got.total ? `${num(o + 1)}–${num(o + n)} of ${num(got.total)}` : "none";
  $(kind + "-prev").disabled = o === 0;
  $(kind + "-next").disabled = o + n >= got.total;
}

function rates(q, now) { // messages in and out per second, from the counters' last values
  const prev = state.last.get(q.name);
  state.last.set(q.name, { t: now, added: q["messages-added"], acked: q["messages-acknowledged"] + q["messages-killed"] + q["messages-expired"] });
  if (!prev || now <= prev.t) return [null, null];
  const dt = (now - prev.t) / 1000;
  const out = q["messages-acknowledged"] + q["messages-killed"] + q["messages-expired"];
  return [Math.max(0, (q["messages-added"] - prev.added) / dt), Math.max(0, (out - prev.acked) / dt)];
}

async function loadQueues() {
  const q = enc($("queues-search").value.trim());
  const sort = state.sort ? "&sort=" + state.sort : "";
  const got = await api("GET", `queues?offset=${state.offsets.queues}&limit=${PAGE}&search=${q}${sort}`);
  const now = performance.now();
  fill($("queues-rows"), got.queues.map((x) => {
    const a = el("a", x.name);
    a.href = "#/queues/" + enc(x.name);
    const [rin, rout] = rates(x, now);
    return row([a, x.address, x["routing-type"], [num(x["message-count"]), "n"], [rate(rin), "n"], [rate(rout), "n"],
      [num(x.delivering), "n"], [num(x.consumers), "n"], x.paused ? "paused" : ""]);
  }), "No queue matches.");
  pager("queues", got);
}

async function loadAddresses() {
  const q = enc($("addresses-search").value.trim());
  const got = await api("GET", `addresses?offset=${state.offsets.addresses}&limit=${PAGE}&search=${q}`);
  fill($("addresses-rows"), got.addresses.map((x) => {
    const b = el("button", "Delete", "danger");
    b.type = "button";
    b.setAttribute("aria-label", "delete address " + x.name);
    b.addEventListener("click", async () => {
      const force = x.queues > 0;
      if (!(await confirmBox(`Delete address ${x.name}${force ? ` and its ${x.queues} queue(s), with their messages` : ""}?`))) return;
      try { await api("DELETE", `addresses/${enc(x.name)}${force ? "?force=true" : ""}`); say(`Address ${x.name} deleted.`); loadAddresses(); }
      catch (e) { say(e.message, true); }
    });
    return row([x.name, x["routing-types"].join(", "), [num(x.queues), "n"], [num(x.routed), "n"], [num(x.unrouted), "n"],
      [num(x.size), "n"], x.paging ? `paging (${num(x.pages)} page files)` : "", b]);
  }), "No address matches.");
  pager("addresses", got);
}

async function loadConnections() {
  const q = enc($("connections-search").value.trim());
  const got = await api("GET", `connections?offset=${state.offsets.connections}&limit=${PAGE}&search=${q}`);
  fill($("connections-rows"), got.connections.map((x) => {
    const b = el("button", "Close", "danger");
    b.type = "button";
    b.setAttribute("aria-label", `close connection ${x.id}`);
    b.addEventListener("click", async () => {
      if (!(await confirmBox(`Close connection ${x.id} (${x.protocol}, ${x.peer})?`))) return;
      try { await api("DELETE", "connections/" + x.id); say(`Connection ${x.id} closed.`); loadConnections(); }
      catch (e) { say(e.message, true); }
    });
    return row([[x.id, "n"], x.protocol, x.listener, x.peer, x.user || "", (x.tls ? "TLS" : "TCP") + (x.websocket ? ", WebSocket" : ""),
      [x["connected-seconds"] + " s", "n"], b]);
  }), "No connection matches.");
  pager("connections", got);
}

// ---- one queue -----------------------------------------------------------------------------

async function openQueue(name) {
  if (state.queue !== name) { state.queue = name; state.history = []; }
  $("queue-title").textContent = "Queue " + name;
  every(loadQueue);
  browse();
  $("queue-back").focus();
}

async function loadQueue() {
  const name = state.queue;
  const q = await api("GET", "queues/" + enc(name));
  const now = performance.now();
  const [rin, rout] = rates(q, now);
  state.history.push({ depth: q["message-count"], rin: rin || 0, rout: rout || 0 });
  if (state.history.length > 300) state.history.shift();
  const stats = [["Messages", q["message-count"], "stat-depth"], ["Delivering", q.delivering], ["Scheduled", q.scheduled],
    ["Added", q["messages-added"]], ["Acknowledged", q["messages-acknowledged"]], ["Expired", q["messages-expired"]],
    ["Dead-lettered", q["messages-killed"]], ["Consumers", q.consumers], ["In /s", rate(rin)], ["Out /s", rate(rout)],
    ["State", q.paused ? "paused" : "delivering"], ["Address", q.address]];
  $("queue-stats").replaceChildren(...stats.map(([k, v, id]) => {
    const d = el("div");
    d.appendChild(el("dt", k));
    const dd = el("dd", typeof v === "number" ? num(v) : v);
    if (id) dd.id = id;
    d.appendChild(dd);
    return d;
  }));
  const may = !!q["may-manage"];
  $("queue-actions").hidden = !may;
  $("act-pause").hidden = !may || q.paused;
  $("act-resume").hidden = !may || !q.paused;
  draw();
  const c = await api("GET", `queues/${enc(name)}/consumers`);
  fill($("consumers-rows"), c.consumers.map((x) => row([[x.connection, "n"], [num(x.credit), "n"], [num(x.delivering), "n"],
    [num(x.delivered), "n"], x.filter])), "No consumer.");
}

async function browse() {
  try {
    const m = await api("GET", `queues/${enc(state.queue)}/messages?limit=50`);
    fill($("messages-rows"), m.messages.map((x) => row([[x["message-id"], "n"],
      [x.body !== undefined ? x.body : `(${num(x["body-size"])} bytes, not text)`, "body"], [num(x["body-size"]), "n"],
      [x.priority, "n"], [x["delivery-count"], "n"],
      Object.entries(x.properties).map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v)).join(", ")])),
    "No message waits.");
  } catch (e) { say(e.message, true); }
}

function draw() {
  const cv = $("queue-chart"), g = cv.getContext("2d"), h = state.history;
  const W = cv.width, H = cv.height, pad = 24;
  g.clearRect(0, 0, W, H);
  g.font = "11px system-ui";
  g.fillStyle = "#5c6773";
  const top = (k) => Math.max(1, ...h.map((p) => p[k]));
  const line = (k, color, max) => {
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.beginPath();
    h.forEach((p, i) => {
      const x = W - pad - ((h.length - 1 - i) / 299) * (W - 2 * pad), y = H - pad - (p[k] / max) * (H - 2 * pad);
      if (i) g.lineTo(x, y); else g.moveTo(x, y);
    });
    g.stroke();
  };
  const css = getComputedStyle(document.documentElement);
  const maxDepth = top("depth"), maxRate = Math.max(top("rin"), top("rout"));
  line("depth", css.getPropertyValue("--depth"), maxDepth);
  line("rin", css.getPropertyValue("--in"), maxRate);
  line("rout", css.getPropertyValue("--out"), maxRate);
  g.fillText(`messages ≤ ${num(maxDepth)}`, 4, 12);
  g.fillText(`rates ≤ ${rate(maxRate)} /s`, W - 120, 12);
  g.fillText("5 min ago", pad, H - 6);
  g.fillText("now", W - pad - 18, H - 6);
}

async function act(what, body, question) {
  const name = state.queue;
  if (question && !(await confirmBox(question))) return;
  try {
    const r = await api(what === "delete" ? "DELETE" : "POST", what === "delete" ? `queues/${enc(name)}` : `queues/${enc(name)}/${what}`,
      what === "delete" ? undefined : body || {});
    say(JSON.stringify(r));
    if (what === "delete") { location.hash = "#/queues"; return; }
    await loadQueue();
    await browse();
  } catch (e) { say(e.message, true); }
}

// ---- wiring --------------------------------------------------------------------------------

function wire() {
  $("login-form").addEventListener("submit", login);
  $("logout").addEventListener("click", logout);
  for (const b of document.querySelectorAll("nav button"))
    b.addEventListener("click", () => { location.hash = "#/" + b.dataset.view; });
  for (const kind of ["queues", "addresses", "connections"]) {
    const load = { queues: loadQueues, addresses: loadAddresses, connections: loadConnections }[kind];
    $(kind + "-prev").addEventListener("click", () => { state.offsets[kind] = Math.max(0, state.offsets[kind] - PAGE); load(); });
    $(kind + "-next").addEventListener("click", () => { state.offsets[kind] += PAGE; load(); });
    $(kind + "-search").addEventListener("input", () => { state.offsets[kind] = 0; load().catch((e) => say(e.message, true)); });
  }
  for (const b of document.querySelectorAll("button.sort")) // the broker sorts: a page of 10,000 queues
    b.addEventListener("click", () => {
      state.sort = state.sort === b.dataset.sort ? "" : b.dataset.sort;
      for (const o of document.querySelectorAll("button.sort")) o.setAttribute("aria-pressed", String(o.dataset.sort === state.sort));
      state.offsets.queues = 0;
      loadQueues().catch((e) => say(e.message, true));
    });
  $("new-queue-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const name = $("nq-name").value.trim();
    try {
      await api("POST", "queues", { name, address: $("nq-address").value.trim() || name, "routing-type": $("nq-type").value,
        options: { durable: $("nq-durable").checked } });
      say(`Queue ${name} created.`);
      $("nq-name").value = "";
      loadQueues();
    } catch (e) { say(e.message, true); }
  });
  $("new-address-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const name = $("na-name").value.trim();
    const types = [...($("na-anycast").checked ? ["ANYCAST"] : []), ...($("na-multicast").checked ? ["MULTICAST"] : [])];
    try {
      await api("POST", "addresses", { name, "routing-types": types });
      say(`Address ${name} created.`);
      $("na-name").value = "";
      loadAddresses();
    } catch (e) { say(e.message, true); }
  });
  $("queue-back").addEventListener("click", () => { location.hash = "#/queues"; });
  $("queue-browse").addEventListener("click", browse);
  $("act-purge").addEventListener("click", () => act("purge", {}, `Purge every waiting message of ${state.queue}?`));
  $("act-pause").addEventListener("click", () => act("pause", {}, null));
  $("act-resume").addEventListener("click", () => act("resume", {}, null));
  $("act-retry").addEventListener("click", () => act("retry", {}, `Send the messages of ${state.queue} back to the queues they came from?`));
  $("act-move").addEventListener("click", () => {
    const to = $("act-move-to").value.trim();
    if (to) act("move", { to }, `Move every waiting message of ${state.queue} to ${to}?`);
  });
  $("act-delete").addEventListener("click", () => act("delete", null, `Delete queue ${state.queue} and its messages?`));
  window.addEventListener("hashchange", () => { if (state.user !== undefined && !$("nav").hidden) route(); });
}

wire();
start();
