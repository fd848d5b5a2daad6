// Parses a request file with the package's own readForwardedPermissionRequest
// (the serving node's reader).
//
// Usage: tsx read_request.ts REQUEST_FILE
// Output: ONE JSON line: the ForwardedPermissionRequest as the reference
// serving node rebuilds it (absent optional fields are omitted), or `null`
// when the package rejects the file. Warnings on stderr.

import { readForwardedPermissionRequest } from "./node_modules/@gotgenes/pi-permission-system/src/authority/forwarding-io.ts";
import { fail, printAndExit, stderrLogger } from "./common.ts";

const file = process.argv[2];
if (!file || process.argv.length !== 3) fail("usage: read_request.ts REQUEST_FILE");
printAndExit(readForwardedPermissionRequest(stderrLogger, file));
