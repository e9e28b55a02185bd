// rhea (AMQP 1.0 for node) against mqrd, over TCP and over a WebSocket (subprotocol
// "amqp", the ws package): sends settled once accepted, a queue and a topic by
// capability, application properties, a FAIL address's rejection. Run by test_rhea.py:
//   node rhea_client.cjs PORT
// Exit 0 when every case passed; each failure is printed.
"use strict";
const rhea = require("rhea");
const WebSocket = require("ws");

const port = Number(process.argv[2]);
const { check, sleep, waitFor, run } = require("./node_check.cjs");

// A connection, over TCP or a WebSocket, once opened.
function connect(ws) {
  return new Promise((resolve, reject) => {
    const container = rhea.create_container({ id: "rhea-" + (ws ? "ws" : "tcp") });
    const options = { reconnect: false };
    if (ws) {
      const factory = container.websocket_connect(WebSocket);
      options.connection_details = factory("ws://127.0.0.1:" + port + "/", ["amqp"], {});
    } else {
      options.host = "127.0.0.1";
      options.port = port;
    }
    const c = container.connect(options);
    c.once("connection_open", () => resolve(c));
    c.once("connection_error", (ctx) => reject(new Error(String(ctx.connection.error))));
    c.once("disconnected", (ctx) => reject(new Error("disconnected: " + (ctx.error || ""))));
  });
}

async function roundTrip(ws) {
  const how = ws ? "websocket" : "tcp";
  const c = await connect(ws);
  const address = "rhea." + how;
  const sender = c.open_sender({ target: { address, capabilities: ["queue"] } });
  let accepted = 0;
  sender.on("accepted", () => accepted++);
  await waitFor(() => sender.sendable());
  for (let i = 0; i < 10; i++)
    sender.send({ body: "m" + i, durable: true, application_properties: { i, kind: how } });
  check(await waitFor(() => accepted === 10), how + ": 10 durable sends accepted");
  const got = [];
  const receiver = c.open_receiver({ source: { address, capabilities: ["queue"] } });
  receiver.on("message", (ctx) => got.push(ctx.message));
  check(await waitFor(() => got.length === 10), how + ": 10 received");
  check(got.map((m) => m.body).join(",") === "m0,m1,m2,m3,m4,m5,m6,m7,m8,m9", how + ": in order, bodies as sent");
  check(got.every((m, i) => m.application_properties.i === i && m.application_properties.kind === how),
    how + ": application properties");
  check(got.every((m) => m.durable === true), how + ": durable");
  c.close();
}

async function topic() {
  const c = await connect(false);
  const got = [[], []];
  for (const k of [0, 1]) {
    const r = c.open_receiver({ source: { address: "rhea.topic", capabilities: ["topic"] } });
    r.on("message", (ctx) => got[k].push(ctx.message.body));
  }
  await sleep(200); // (both subscriptions attached)
  const s = c.open_sender({ target: { address: "rhea.topic", capabilities: ["topic"] } });
  await waitFor(() => s.sendable());
  s.send({ body: "tick" });
  check(await waitFor(() => got[0].length === 1 && got[1].length === 1), "topic: each subscriber gets it");
  c.close();
}

async function rejected() {
  const c = await connect(false);
  const s = c.open_sender({ target: { address: "full.rhea", capabilities: ["queue"] } });
  let accepted = 0, rejectedCount = 0, condition = "";
  s.on("accepted", () => accepted++);
  s.on("rejected", (ctx) => {
    rejectedCount++;
    condition = ctx.delivery.remote_state && ctx.delivery.remote_state.error ? ctx.delivery.remote_state.error.condition : "";
  });
  await waitFor(() => s.sendable());
  for (let i = 0; i < 3; i++) s.send({ body: "x".repeat(600) });
  check(await waitFor(() => accepted + rejectedCount === 3), "FAIL address: every send answered");
  check(rejectedCount >= 1 && condition === "amqp:resource-limit-exceeded",
    "FAIL address: rejected with amqp:resource-limit-exceeded (" + condition + ")");
  c.close();
}

// One connection that both sends to a small BLOCK address and consumes from it: the
// producer is held by link credit, not by the connection's reads, so the consumer's
// acknowledgements still come in, the address drains, and every send is accepted.
async function blockedByCredit() {
  const c = await connect(false);
  const s = c.open_sender({ target: { address: "blk.rhea", capabilities: ["queue"] } });
  const r = c.open_receiver({ source: { address: "blk.rhea", capabilities: ["queue"] }, autoaccept: false,
    credit_window: 0 });
  let accepted = 0, received = 0, sent = 0, minCredit = Infinity;
  s.on("accepted", () => accepted++);
  r.on("message", (ctx) => {
    received++;
    setTimeout(() => { ctx.delivery.accept(); r.add_credit(1); }, 1); // a consumer slower than its producer
  });
  r.add_credit(10);
  const body = "b".repeat(1024);
  const pump = () => {
    while (sent < 3000 && s.sendable()) {
      s.send({ body, durable: false });
      sent++;
    }
    minCredit = Math.min(minCredit, s.credit);
  };
  s.on("sendable", pump);
  pump();
  check(await waitFor(() => accepted === 3000 && received === 3000, 60000),
    "BLOCK by credit: 3000 sends through a 64 KiB address on one connection (accepted " + accepted + ", received " +
      received + ")");
  check(minCredit === 0, "BLOCK by credit: the producer ran out of credit while the address was full");
  c.close();
}

run([blockedByCredit, () => roundTrip(false), () => roundTrip(true), topic, rejected]);
