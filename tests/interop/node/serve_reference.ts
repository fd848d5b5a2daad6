// Runs the real 20.7.3 in-pi forwarded-request server (`ForwardedRequestServer`) on one session's
// inbox, the way a pi parent does: `processInbox` every 250 ms (the package's own interval), one
// pass at a time. Its recorded authority allows everything (`policy.check` -> allow), so every
// request it drains is answered `approved`: a second server beside pi-authorizer on the same inbox.
//
// Usage: tsx serve_reference.ts FORWARDING_DIR SESSION_ID
// Prints ONE JSON line `{"ready": true, "pid": N}` on stdout once started, then serves until
// killed. Review/debug log events of the package go to stderr, one JSON line each.

import { ForwardedRequestServer } from "./node_modules/@gotgenes/pi-permission-system/src/authority/forwarded-request-server.ts";
import { PERMISSION_FORWARDING_POLL_INTERVAL_MS } from "./node_modules/@gotgenes/pi-permission-system/src/authority/permission-forwarding.ts";
import { fail, stderrLogger } from "./common.ts";

const [forwardingDir, sessionId] = process.argv.slice(2);
if (!forwardingDir || !sessionId) fail("usage: serve_reference.ts FORWARDING_DIR SESSION_ID");

const server = new ForwardedRequestServer({
  forwardingDir,
  logger: stderrLogger,
  policy: { check: () => ({ state: "allow" }) } as never,
  escalator: { escalate: () => Promise.resolve({ approved: true, state: "approved" }) } as never,
  recorder: { recordSessionApproval: () => undefined } as never,
});
const ctx = {
  hasUI: false,
  ui: { select: () => Promise.resolve(undefined), input: () => Promise.resolve(undefined) },
  sessionManager: { getSessionId: () => sessionId, getSessionDir: () => "", getEntries: () => [] },
  getSystemPrompt: () => "",
} as never;

let busy = false;
setInterval(() => {
  if (busy) return;
  busy = true;
  void server.processInbox(ctx).finally(() => {
    busy = false;
  });
}, PERMISSION_FORWARDING_POLL_INTERVAL_MS);
process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid })}\n`);
