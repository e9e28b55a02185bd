// What the node clients' cases share (each run by the tests/clients/test_*.py that starts
// it): check prints ok or FAIL and counts a failure; run runs the cases in order, an error
// one throws a failure of its own, and exits 0 when none failed.
"use strict";
let failures = 0;

function check(cond, what) {
  if (!cond) failures++;
  console.log((cond ? "ok   " : "FAIL ") + what);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(pred, ms = 5000) {
  const end = Date.now() + ms;
  while (!pred() && Date.now() < end) await sleep(20);
  return pred();
}

async function run(cases) {
  for (const t of cases) {
    try {
      await t();
    } catch (e) {
      failures++;
      console.log("FAIL " + (t.name || "a case") + ": " + (e && e.stack ? e.stack : e));
    }
  }
  process.exit(failures ? 1 : 0);
}

module.exports = { check, sleep, waitFor, run };
