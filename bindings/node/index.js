// Node.js entry: loads the WebAssembly core from the package and exports the API.

import { readFileSync } from 'node:fs';

import { initSync } from './wasm/redlock_wasm.js';

initSync({ module: readFileSync(new URL('./wasm/redlock_wasm_bg.wasm', import.meta.url)) });

import { setTracingApi } from './src/tracing.js';

// OpenTelemetry is an optional peer dependency: `tracer: true` uses its global tracer
// when it is installed.
try {
  setTracingApi(await import('@opentelemetry/api'));
} catch {
  // Not installed: only a Tracer handed in (`tracer: myTracer`) traces.
}

export * from './src/api.js';
export { netSocket, sentinelSocket } from './src/net.js';
