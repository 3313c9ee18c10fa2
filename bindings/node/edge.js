// Edge-runtime entry (Cloudflare workerd and the like): no Node.js modules. Runtimes
// that refuse to compile WebAssembly from bytes at run time hand in the module they
// imported: `import wasm from 'redlock-core/wasm/redlock_wasm_bg.wasm'; init(wasm);`

import { initSync } from './wasm/redlock_wasm.js';

let initialised = false;

/**
 * Instantiates the core from a WebAssembly.Module (or the module's bytes where the
 * runtime allows compiling them). Calling it again does nothing.
 */
export function init(module) {
  if (initialised) return;
  initSync({ module });
  initialised = true;
}

export * from './src/api.js';
