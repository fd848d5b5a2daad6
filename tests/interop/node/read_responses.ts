// Parses many response files with the package's own readForwardedPermissionResponse.
//
// Usage: tsx read_responses.ts RESPONSE_FILE...
// Output: ONE JSON line: an object mapping each file to the ForwardedPermissionResponse the real
// child would act on, or `null` when the package rejects that file. Warnings on stderr.

import { readForwardedPermissionResponse } from "./node_modules/@gotgenes/pi-permission-system/src/authority/forwarding-io.ts";
import { fail, printAndExit, stderrLogger } from "./common.ts";

const files = process.argv.slice(2);
if (files.length === 0) fail("usage: read_responses.ts RESPONSE_FILE...");
const read: Record<string, unknown> = {};
for (const file of files) {
  read[file] = readForwardedPermissionResponse(stderrLogger, file) ?? null;
}
printAndExit(read);
