// Parses a response file with the package's own readForwardedPermissionResponse.
//
// Usage: tsx read_response.ts RESPONSE_FILE
// Output: ONE JSON line: the ForwardedPermissionResponse the real child would
// act on, or `null` when the package rejects the file. Warnings on stderr.

import { readForwardedPermissionResponse } from "./node_modules/@gotgenes/pi-permission-system/src/authority/forwarding-io.ts";
import { fail, printAndExit, stderrLogger } from "./common.ts";

const file = process.argv[2];
if (!file || process.argv.length !== 3) fail("usage: read_response.ts RESPONSE_FILE");
printAndExit(readForwardedPermissionResponse(stderrLogger, file));
