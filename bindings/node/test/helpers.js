// Real local Redis nodes for the integration tests, started and stopped by the
// project's script (scripts/redis-nodes.sh), and small helpers around them.

import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('../../../scripts/redis-nodes.sh', import.meta.url));

function run(...args) {
  return execFileSync(script, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** A set of N nodes on ports basePort.. ; stop() is idempotent. */
export class RedisNodes {
  constructor(basePort, count = 5) {
    this.basePort = basePort;
    this.count = count;
    this.ports = Array.from({ length: count }, (_, i) => basePort + i);
    this.running = false;
  }

  start() {
    const urls = run('start', '--nodes', String(this.count), '--base-port', String(this.basePort))
      .trim()
      .split('\n');
    this.running = true;
    // Whatever happens to the test process, do not leave nodes behind.
    this.onExit = () => this.stop();
    process.once('exit', this.onExit);
    return urls;
  }

  stop() {
    if (!this.running) return;
    this.running = false;
    process.removeListener('exit', this.onExit);
    run('stop', '--base-port', String(this.basePort));
  }

  pause(index) {
    run('pause', String(index), '--base-port', String(this.basePort));
  }

  resume(index) {
    run('resume', String(index), '--base-port', String(this.basePort));
  }

  kill(index) {
    run('kill', String(index), '--base-port', String(this.basePort));
  }

  restart(index) {
    run('restart', String(index), '--base-port', String(this.basePort));
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
