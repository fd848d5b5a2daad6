// Prints the package's own forwarding location for session ids.
//
// Usage: tsx location.ts FORWARDING_DIR SESSION_ID [SESSION_ID...]
// Output: ONE JSON line: an array with, per id,
//   {input, normalized, location} where `normalized` is
//   normalizePermissionForwardingSessionId(id) and `location` is
//   createPermissionForwardingLocation(FORWARDING_DIR, id) (null when the
//   package refuses the id: blank or "unknown").

import {
  createPermissionForwardingLocation,
  normalizePermissionForwardingSessionId,
} from "./node_modules/@gotgenes/pi-permission-system/src/authority/permission-forwarding.ts";
import { fail, printAndExit } from "./common.ts";

const [forwardingDir, ...ids] = process.argv.slice(2);
if (!forwardingDir || ids.length === 0) fail("usage: location.ts FORWARDING_DIR SESSION_ID [SESSION_ID...]");
printAndExit(
  ids.map((input) => {
    const normalized = normalizePermissionForwardingSessionId(input);
    return {
      input,
      normalized,
      location: normalized === null ? null : createPermissionForwardingLocation(forwardingDir, input),
    };
  }),
);
