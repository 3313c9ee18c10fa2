// Node.js entry: loads the WebAssembly core from the package and exports the API.

import { readFileSync } from 'node:fs';

import { initSync } from './wasm/redlock_wasm.js';

initSync({ module: readFileSync(new URL('./wasm/redlock_wasm_bg.wasm', import.meta.url)) });

export * from './src/api.js';
export { netSocket } from './src/net.js';
