// Judges many cases with the real 20.7.3 PermissionManager in ONE node process (the differential
// test's oracle; nothing of the package is copied).
//
// Usage: tsx judge.ts < CASES_JSON   (HOME in the environment is the home `~` expands to)
//
// CASES_JSON: [{agentDir, cwd, agent, surface, kind, values?, input?}, ...]
//   kind "path-values": check({kind:"path-values", surface, values})  (evaluateAnyValue on path
//                        surfaces, evaluateFirst elsewhere: the child-fixed alias or candidate list)
//   kind "tool":        check({kind:"tool", surface, input})           (normalizeInput: bash
//                        comment stripping and trimming, skill names, `{}` -> ["*"] for tools)
// Each case gets a fresh manager over its own files (the package caches by file mtime).
// Output: ONE JSON line, per case {state, matchedPattern, origin, layer, reason} or {error}.

import { register } from "node:module";
import { join } from "node:path";
import { printAndExit, readStdin } from "./common.ts";

// The package's policy loader imports its uninstalled peer; map it to a stand-in first.
register("./peer_shim.mjs", import.meta.url);
const { PermissionManager } = await import(
  "./node_modules/@gotgenes/pi-permission-system/src/permission-manager.ts"
);

type Case = {
  agentDir: string;
  cwd: string;
  agent: string | null;
  surface: string;
  kind: "path-values" | "tool";
  values?: string[];
  input?: unknown;
};

function judge(item: Case): Record<string, unknown> {
  const manager = new PermissionManager({
    globalConfigPath: join(item.agentDir, "extensions", "pi-permission-system", "config.json"),
    agentsDir: join(item.agentDir, "agents"),
    projectGlobalConfigPath: join(item.cwd, ".pi", "extensions", "pi-permission-system", "config.json"),
    projectAgentsDir: join(item.cwd, ".pi", "agents"),
    globalMcpConfigPath: join(item.agentDir, "mcp.json"),
    mcpServerNames: [],
  });
  const agentName = item.agent ?? undefined;
  const result =
    item.kind === "path-values"
      ? manager.check({ kind: "path-values", surface: item.surface, values: item.values ?? [], agentName })
      : manager.check({ kind: "tool", surface: item.surface, input: item.input ?? {}, agentName });
  return {
    state: result.state,
    matchedPattern: result.matchedPattern ?? null,
    origin: result.origin ?? null,
    reason: result.reason ?? null,
  };
}

async function main(): Promise<void> {
  const cases = JSON.parse(await readStdin()) as Case[];
  const results = cases.map((item) => {
    try {
      return judge(item);
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
  });
  printAndExit(results);
}

void main();
