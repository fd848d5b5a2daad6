// Serves one session's forwarding inbox with the real 20.7.3 ForwardedRequestServer, polled the way
// the package's own ForwardingManager polls it (every PERMISSION_FORWARDING_POLL_INTERVAL_MS, one
// drain at a time). For side-by-side benchmarks (bench/bench_race.py): an instant policy, no history.
//
// Usage: tsx reference_server.ts FORWARDING_DIR SESSION_ID [allow|deny|ask]
//   The policy answers every (surface, value) with the given state (default allow); an `ask`
//   escalates to an escalator that denies at once. Prints "ready" on stdout once polling, and
//   serves until SIGTERM. Package log events are dropped (the reference's logger is a seam).

import { ForwardedRequestServer } from "./node_modules/@gotgenes/pi-permission-system/src/authority/forwarded-request-server.ts";
import { PERMISSION_FORWARDING_POLL_INTERVAL_MS } from "./node_modules/@gotgenes/pi-permission-system/src/authority/permission-forwarding.ts";
import { fail } from "./common.ts";

const [forwardingDir, sessionId, stateArg] = process.argv.slice(2);
if (!forwardingDir || !sessionId) fail("usage: reference_server.ts FORWARDING_DIR SESSION_ID [allow|deny|ask]");
const state = (stateArg ?? "allow") as "allow" | "deny" | "ask";
if (!["allow", "deny", "ask"].includes(state)) fail(`unknown policy state ${stateArg}`);

const quiet = { review(): void {}, debug(): void {} };
const server = new ForwardedRequestServer({
  forwardingDir,
  logger: quiet,
  policy: { check: () => ({ toolName: "bench", state, source: "default", origin: "default" }) as never },
  escalator: { escalate: async () => ({ approved: false, state: "denied" }) },
  recorder: { recordSessionApproval(): void {} },
});
const ctx = {
  hasUI: true,
  ui: {} as never,
  sessionManager: { getSessionId: () => sessionId, getSessionDir: () => forwardingDir, getEntries: () => [] },
};

let processing = false;
const timer = setInterval(() => {
  if (processing) return;
  processing = true;
  void server.processInbox(ctx).finally(() => {
    processing = false;
  });
}, PERMISSION_FORWARDING_POLL_INTERVAL_MS);
process.on("SIGTERM", () => {
  clearInterval(timer);
  process.exit(0);
});
process.stdout.write("ready\n");
