// Type-checks a TypeScript program against the package's declarations, then runs what
// tsc emitted (its `await using` included) against 5 real local Redis nodes.

import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';

import { RedisNodes } from './helpers.js';

const nodes = new RedisNodes(7250);
let urls;

before(() => {
  urls = nodes.start();
});

after(() => nodes.stop());

test('the declarations type-check real use, and await using releases the lock', async () => {
  const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
  const project = fileURLToPath(new URL('types/tsconfig.json', import.meta.url));
  // Throws with tsc's diagnostics when the types do not fit.
  execFileSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8', stdio: 'pipe' });
  const { run } = await import('./types-out/usage.js');
  await run(urls);
});
