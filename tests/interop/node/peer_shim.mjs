// Resolve hook for the package's peer dependency `@earendil-works/pi-coding-agent`, which the
// interop drivers do not install. Only `getAgentDir` is reached at import time (policy-loader's
// defaults); the drivers always pass explicit paths, so the stand-in throws if it is ever called.
export async function resolve(specifier, context, next) {
  if (specifier === "@earendil-works/pi-coding-agent") {
    return { url: new URL("./peer_pi_coding_agent.mjs", import.meta.url).href, shortCircuit: true };
  }
  return next(specifier, context);
}
