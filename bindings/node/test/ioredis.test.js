// The integration suite with ioredis clients without a command timeout: the deadlines
// come from the core, not from the client. The offline queue is off, as this package
// recommends, and so is resending unanswered commands after a reconnect: either would
// send a lock attempt's SET when a node comes back, long after the attempt gave up
// (the key then lingers until its TTL).

import Redis from 'ioredis';

import { integrationSuite } from './suite.js';

integrationSuite('ioredis', 7210, async (urls) => {
  const clients = urls.map((url) => {
    const client = new Redis(url, { enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    client.on('error', () => {}); // refused connections while a node is down
    return client;
  });
  await Promise.all(clients.map((client) => new Promise((resolve) => client.once('ready', resolve))));
  return { clients, close: () => clients.forEach((client) => client.disconnect()) };
});
