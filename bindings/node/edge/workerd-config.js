// Writes a workerd config (Cap'n Proto text) that serves edge/worker.js with the package's
// modules, each named by its path in the package so relative imports resolve.

import { readdirSync, writeFileSync } from 'node:fs';
import { dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function modules(configDir) {
  const list = [['edge/worker.js', 'esModule'], ['edge.js', 'esModule']];
  for (const name of readdirSync(`${root}src`).sort()) {
    if (name.endsWith('.js') && name !== 'net.js') list.push([`src/${name}`, 'esModule']);
  }
  list.push(['wasm/redlock_wasm.js', 'esModule'], ['wasm/redlock_wasm_bg.wasm', 'wasm']);
  // The JS helpers the module imports (wasm-bindgen's inline_js snippets).
  for (const entry of readdirSync(`${root}wasm/snippets`, { recursive: true }).sort()) {
    if (String(entry).endsWith('.js')) list.push([`wasm/snippets/${entry}`, 'esModule']);
  }
  return list
    // embed takes paths relative to the config file.
    .map(([name, kind]) => `    (name = "${name}", ${kind} = embed "${relative(configDir, root + name)}")`)
    .join(',\n');
}

/** Writes the config to `path`; the worker listens on 127.0.0.1:`port`. */
export function writeConfig(path, port) {
  const config = `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    # Redis runs on loopback: let the worker's sockets reach local addresses.
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);

const worker :Workerd.Worker = (
  modules = [
${modules(dirname(path))}
  ],
  compatibilityDate = "2025-09-01",
);
`;
  writeFileSync(path, config);
}
