// Shared helpers for the interop driver scripts.
//
// Nothing of the reference package is copied here: every driver imports the
// real @gotgenes/pi-permission-system@20.7.3 modules by file path from
// node_modules (the package's `exports` only exposes "." = the whole
// extension, so subpath imports are refused).

/** Logger satisfying the package's DebugReviewLogger: one JSON line per event on stderr. */
export const stderrLogger = {
  review(event: string, details?: Record<string, unknown>): void {
    process.stderr.write(`${JSON.stringify({ stream: "review", event, ...details })}\n`);
  },
  debug(event: string, details?: Record<string, unknown>): void {
    process.stderr.write(`${JSON.stringify({ stream: "debug", event, ...details })}\n`);
  },
};

/** Read all of stdin as UTF-8. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) {
    chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
  }
  return Buffer.concat(chunks).toString("utf-8");
}

/** Print one JSON line on stdout and exit once it is flushed. */
export function printAndExit(value: unknown, code = 0): void {
  process.stdout.write(`${JSON.stringify(value === undefined ? null : value)}\n`, () => {
    process.exit(code);
  });
}

export function fail(message: string, code = 2): never {
  process.stderr.write(`${JSON.stringify({ stream: "driver", event: "error", message })}\n`);
  process.exit(code);
}
