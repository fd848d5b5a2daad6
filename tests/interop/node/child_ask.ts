// Acts as a real 20.7.3 child: forwards one ask through the package's own
// ParentAuthorizer and prints the decision it reads back.
//
// Usage:
//   tsx child_ask.ts FORWARDING_DIR REQUESTER_SESSION_ID AGENT_NAME [DETAILS_JSON | -] [--via-gate]
//
// DETAILS_JSON (or stdin when omitted or "-") is the ask, as `authorize(details)`
// takes it: {requestId, source, message, surface?, value?, toolName?,
// sessionApproval?: {surface, patterns}}. `agentName` defaults to AGENT_NAME.
// The target (serving) session comes from env PI_SUBAGENT_PARENT_SESSION;
// PI_AGENT_ROUTER_PARENT_SESSION_ID is cleared because it would win.
//
// Output: ONE JSON line on stdout, then exit 0.
//   default:     the PermissionPromptDecision, e.g. {"approved":false,"state":"denied"}
//   --via-gate:  {"decision": …, "outcome": {"action":"allow"|"block", …},
//                 "sessionRules": [...]} — the ask runs through the package's
//                 GateRunner (preChecked as `ask`) with a real SessionRules
//                 store, so an `approved_for_session` answer is recorded the
//                 way the child's gate records it.
// Review/debug log events of the package go to stderr, one JSON line each.

import { ParentAuthorizer } from "./node_modules/@gotgenes/pi-permission-system/src/authority/approval-escalator.ts";
import { PermissionPrompter } from "./node_modules/@gotgenes/pi-permission-system/src/authority/permission-prompter.ts";
import { GateRunner } from "./node_modules/@gotgenes/pi-permission-system/src/handlers/gates/runner.ts";
import { SessionApproval } from "./node_modules/@gotgenes/pi-permission-system/src/session-approval.ts";
import { SessionRules } from "./node_modules/@gotgenes/pi-permission-system/src/session-rules.ts";
import { fail, printAndExit, readStdin, stderrLogger } from "./common.ts";

type AskDetails = {
  requestId: string;
  source: "tool_call" | "skill_input" | "skill_read";
  agentName?: string | null;
  message: string;
  surface?: string | null;
  value?: string | null;
  toolName?: string;
  sessionApproval?: { surface: string; patterns: string[] };
};

async function main(): Promise<void> {
  const flags = process.argv.slice(2).filter((a) => a.startsWith("--"));
  const args = process.argv.slice(2).filter((a) => !a.startsWith("--"));
  const viaGate = flags.includes("--via-gate");
  const unknown = flags.filter((f) => f !== "--via-gate");
  if (unknown.length > 0) fail(`unknown flag(s): ${unknown.join(" ")}`);
  if (args.length < 3 || args.length > 4) {
    fail("usage: child_ask.ts FORWARDING_DIR REQUESTER_SESSION_ID AGENT_NAME [DETAILS_JSON|-] [--via-gate]");
  }
  const [forwardingDir, requesterSessionId, agentName] = args;
  const rawDetails = args.length === 4 && args[3] !== "-" ? args[3] : await readStdin();
  let parsed: AskDetails;
  try {
    parsed = JSON.parse(rawDetails) as AskDetails;
  } catch (error) {
    fail(`DETAILS_JSON is not JSON: ${String(error)}`);
  }
  const details = { agentName, ...parsed };

  // The reference's target resolution: the router variable wins if set.
  delete process.env.PI_AGENT_ROUTER_PARENT_SESSION_ID;

  const ctx = {
    hasUI: false,
    ui: {
      select: () => Promise.resolve(undefined),
      input: () => Promise.resolve(undefined),
    },
    sessionManager: {
      getSessionId: () => requesterSessionId,
      getSessionDir: () => "",
      getEntries: () => [{ type: "custom", customType: "active_agent", data: { name: agentName } }],
    },
    getSystemPrompt: () => "",
  };
  const authorizer = new ParentAuthorizer(ctx, { forwardingDir, logger: stderrLogger });

  if (!viaGate) {
    printAndExit(await authorizer.authorize(details));
    return;
  }

  const sessionRules = new SessionRules();
  const prompter = new PermissionPrompter({ logger: stderrLogger });
  let decision: unknown = null;
  const surface = details.surface ?? details.toolName ?? "bash";
  const value = details.value ?? "";
  const check = {
    toolName: surface,
    state: "ask" as const,
    source: "tool" as const,
    origin: "builtin" as const,
    ...(surface === "bash" ? { command: value } : {}),
  };
  const runner = new GateRunner(
    { resolve: () => check } as never,
    sessionRules,
    {
      escalate: async (d) => {
        const result = await prompter.prompt(authorizer, d);
        decision = result;
        return result;
      },
    },
    {
      writeReviewLog: (event, extra) => stderrLogger.review(event, extra),
      emitDecision: (event) => stderrLogger.debug("permissions:decision", { ...event }),
    },
  );
  const outcome = await runner.run(
    {
      surface,
      input: surface === "bash" ? { command: value } : {},
      denialContext: { kind: "tool", check, agentName },
      ...(details.sessionApproval
        ? {
            sessionApproval: SessionApproval.multiple(
              details.sessionApproval.surface,
              details.sessionApproval.patterns,
            ),
          }
        : {}),
      promptDetails: {
        source: details.source,
        agentName: details.agentName ?? null,
        message: details.message,
        ...(details.toolName !== undefined ? { toolName: details.toolName } : {}),
        ...(details.surface !== undefined ? { surface: details.surface } : {}),
        ...(details.value !== undefined ? { value: details.value } : {}),
      },
      logContext: { source: details.source },
      decision: { surface, value },
      preCheck: check,
    },
    details.agentName ?? null,
    details.requestId,
  );
  printAndExit({ decision, outcome, sessionRules: sessionRules.getRuleset() });
}

main().catch((error: unknown) => fail(error instanceof Error ? (error.stack ?? error.message) : String(error)));
