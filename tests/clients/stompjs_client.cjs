// @stomp/stompjs over TCP (@stomp/tcp-wrapper) against mqrd: every ack mode, NACK,
// transactions, receipts, heart-beats both ways, selectors. Run by test_stompjs.py:
//   node stompjs_client.cjs PORT
// Exit 0 when every case passed; each failure is printed.
"use strict";
const { Client } = require("@stomp/stompjs");
const { TCPWrapper } = require("@stomp/tcp-wrapper");

const port = Number(process.argv[2]);
const { check, sleep, waitFor, run } = require("./node_check.cjs");

function connect(extra = {}) {
  return new Promise((resolve, reject) => {
    const c = new Client({
      webSocketFactory: () => new TCPWrapper("127.0.0.1", port),
      reconnectDelay: 0,
      heartbeatIncoming: 0,
      heartbeatOutgoing: 0,
      ...extra,
    });
    c.onConnect = (frame) => resolve({ c, frame });
    c.onStompError = (frame) => reject(new Error(frame.headers.message + ": " + frame.body));
    c.onWebSocketError = (e) => reject(e);
    c.activate();
  });
}

async function ackModes() {
  const { c } = await connect();
  // auto: nothing to acknowledge
  const auto = [];
  const s1 = c.subscribe("/queue/js.auto", (m) => auto.push(m.body), { ack: "auto" });
  c.publish({ destination: "/queue/js.auto", body: "a1", headers: { "destination-type": "ANYCAST" } });
  await waitFor(() => auto.length === 1);
  check(auto[0] === "a1", "auto ack delivers");
  s1.unsubscribe();
  // client-individual: ack the first, nack the second (it comes back redelivered)
  const ind = [];
  const s2 = c.subscribe("js.ind", (m) => ind.push(m), { ack: "client-individual", "subscription-type": "ANYCAST" });
  for (const b of ["i1", "i2"]) c.publish({ destination: "js.ind", body: b, headers: { "destination-type": "ANYCAST" } });
  await waitFor(() => ind.length === 2);
  ind[0].ack();
  ind[1].nack();
  await waitFor(() => ind.length === 3);
  check(ind.length === 3 && ind[2].body === "i2" && ind[2].headers.redelivered === "true", "NACK redelivers");
  ind[2].ack();
  s2.unsubscribe();
  // client: one ACK covers every earlier message
  const cum = [];
  const s3 = c.subscribe("js.cum", (m) => cum.push(m), { ack: "client", "subscription-type": "ANYCAST" });
  for (const b of ["c1", "c2", "c3"]) c.publish({ destination: "js.cum", body: b, headers: { "destination-type": "ANYCAST" } });
  await waitFor(() => cum.length === 3);
  cum[1].ack(); // c1 and c2
  await sleep(200);
  s3.unsubscribe();
  await sleep(200);
  const again = [];
  const s4 = c.subscribe("js.cum", (m) => again.push(m), { ack: "client", "subscription-type": "ANYCAST" });
  await waitFor(() => again.length >= 1);
  await sleep(200);
  check(again.length === 1 && again[0].body === "c3", "client ACK is cumulative");
  again[0].ack();
  s4.unsubscribe();
  await c.deactivate();
}

async function transactionsAndReceipts() {
  const { c } = await connect();
  const got = [];
  const receipts = [];
  c.watchForReceipt("sub-r", () => receipts.push("sub-r"));
  c.subscribe("js.tx", (m) => got.push(m), { ack: "client-individual", "subscription-type": "ANYCAST", receipt: "sub-r" });
  await waitFor(() => receipts.length === 1);
  check(receipts[0] === "sub-r", "RECEIPT for SUBSCRIBE");
  const t1 = c.begin();
  c.publish({ destination: "js.tx", body: "dropped", headers: { transaction: t1.id, "destination-type": "ANYCAST" } });
  t1.abort();
  const t2 = c.begin();
  c.publish({ destination: "js.tx", body: "kept", headers: { transaction: t2.id, "destination-type": "ANYCAST" } });
  await sleep(300);
  check(got.length === 0, "nothing before COMMIT");
  t2.commit();
  await waitFor(() => got.length === 1);
  check(got.length === 1 && got[0].body === "kept", "COMMIT sends, ABORT drops");
  c.watchForReceipt("send-r", () => receipts.push("send-r"));
  c.publish({ destination: "js.other", body: "r", headers: { receipt: "send-r", "destination-type": "ANYCAST" } });
  await waitFor(() => receipts.length === 2);
  check(receipts.includes("send-r"), "RECEIPT for SEND");
  const t3 = c.begin();
  got[0].ack(t3.id);
  t3.commit();
  await sleep(200);
  await c.deactivate();
}

async function heartBeats() {
  const { c, frame } = await connect({ heartbeatIncoming: 500, heartbeatOutgoing: 500 });
  check(frame.headers["heart-beat"] === "500,500", "heart-beat negotiated: " + frame.headers["heart-beat"]);
  let beats = 0;
  const orig = c.webSocket.onmessage;
  c.webSocket.onmessage = (ev) => {
    if (ev.data === "\n" || (ev.data && ev.data.length === 1)) beats++;
    orig(ev);
  };
  await sleep(2200);
  check(c.connected, "still connected after 2.2 s of heart-beats");
  check(beats >= 2, "the broker's heart-beats arrive (" + beats + ")");
  await c.deactivate();
}

async function selectors() {
  const { c } = await connect();
  const red = [];
  const other = [];
  c.subscribe("js.sel", (m) => red.push(m.body), { "subscription-type": "MULTICAST", selector: "color = 'red'" });
  c.subscribe("js.sel", (m) => other.push(m.body), { "subscription-type": "MULTICAST", selector: "color <> 'red'" });
  await sleep(200);
  for (const color of ["red", "blue", "red"])
    c.publish({ destination: "js.sel", body: color, headers: { color, "destination-type": "MULTICAST" } });
  await waitFor(() => red.length + other.length === 3);
  await sleep(200);
  check(red.join() === "red,red" && other.join() === "blue", "selectors");
  await c.deactivate();
}

run([ackModes, transactionsAndReceipts, heartBeats, selectors]);
