// MQTT.js (npm mqtt) and @stomp/stompjs (over the npm ws WebSocket) against mqrd's
// WebSockets, ws:// and wss://. Run by test_websocket.py:
//   node ws_clients.cjs PORT TLS_PORT CA_FILE
// Exit 0 when every case passed; each result is printed.
"use strict";
const fs = require("fs");
const mqtt = require("mqtt");
const WebSocket = require("ws");
const { Client } = require("@stomp/stompjs");
const { check, sleep, waitFor, run } = require("./node_check.cjs");

const [port, tlsPort, caFile] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4]];
const ca = fs.readFileSync(caFile);
async function mqttCase(url, opts, what) {
  const got = [];
  const sub = mqtt.connect(url, { clientId: "js-sub-" + what, protocolVersion: 5, ...opts });
  sub.on("message", (t, p) => got.push([t, p.toString()]));
  await new Promise((res, rej) => { sub.on("connect", res); sub.on("error", rej); });
  await sub.subscribeAsync("ws/" + what, { qos: 1 });
  const pub = mqtt.connect(url, { clientId: "js-pub-" + what, protocolVersion: 4, ...opts });
  await new Promise((res, rej) => { pub.on("connect", res); pub.on("error", rej); });
  const big = "x".repeat(100000);
  await pub.publishAsync("ws/" + what, "hello", { qos: 1 });
  await pub.publishAsync("ws/" + what, big, { qos: 0 });
  check(await waitFor(() => got.length === 2), `MQTT.js ${what}: QoS 1 and a 100 KB QoS 0 message both ways`);
  check(got.length === 2 && got[0][1] === "hello" && got[1][1] === big, `MQTT.js ${what}: the bodies as sent`);
  await pub.endAsync();
  await sub.endAsync();
}

async function stompCase(url, opts, what) {
  const got = [];
  const c = new Client({
    webSocketFactory: () => new WebSocket(url, ["v12.stomp", "v11.stomp", "v10.stomp"], opts),
    reconnectDelay: 0,
    heartbeatIncoming: 0,
    heartbeatOutgoing: 0,
  });
  await new Promise((res, rej) => {
    c.onConnect = res;
    c.onStompError = (f) => rej(new Error(f.headers.message));
    c.onWebSocketError = rej;
    c.activate();
  });
  c.subscribe("/queue/ws." + what, (m) => got.push(m.body));
  await sleep(100);
  let receipt = false;
  c.watchForReceipt("r1", () => { receipt = true; });
  c.publish({ destination: "/queue/ws." + what, body: "over " + what, headers: { receipt: "r1" } });
  check(await waitFor(() => got.length === 1 && receipt), `stompjs ${what}: SEND with a receipt, MESSAGE back`);
  check(got[0] === "over " + what, `stompjs ${what}: the body as sent`);
  await c.deactivate();
}

run([
  () => mqttCase(`ws://127.0.0.1:${port}/mqtt`, {}, "ws"),
  () => mqttCase(`wss://localhost:${tlsPort}/mqtt`, { ca, rejectUnauthorized: true }, "wss"),
  () => stompCase(`ws://127.0.0.1:${port}/stomp`, {}, "ws"),
  () => stompCase(`wss://localhost:${tlsPort}/stomp`, { ca }, "wss"),
]);
