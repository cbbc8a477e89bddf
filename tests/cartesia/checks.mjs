// checks.mjs — what client_suite.mjs and ws_suite.mjs share: one JSON line
// per check ({"check": NAME, "ok": BOOL, "info": TEXT}, read by
// tests/node_suite.c), a check that reports its return value or its error,
// and an assertion.

export function report(check, ok, info) {
  console.log(JSON.stringify({ check, ok: !!ok, info: String(info ?? '') }));
}

export async function check(name, fn) {
  try {
    report(name, true, await fn());
  } catch (e) {
    report(name, false, (e && e.stack) || e);
  }
}

export function must(cond, what) {
  if (!cond) throw new Error(what);
}
