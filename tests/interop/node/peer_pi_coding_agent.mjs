// Stand-in for the uninstalled peer `@earendil-works/pi-coding-agent` (see peer_shim.mjs).
export function getAgentDir() {
  throw new Error("getAgentDir() reached: the interop driver must pass explicit config paths");
}
