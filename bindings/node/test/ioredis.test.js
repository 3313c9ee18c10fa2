// The integration suite with ioredis clients at their default settings (offline queue
// on, unanswered commands resent after a reconnect, no command timeout): the deadlines,
// the bound in flight and what is written on a new connection are the core links'.

import Redis from 'ioredis';

import { integrationSuite } from './suite.js';

integrationSuite('ioredis', 7210, async (urls) => {
  const clients = urls.map((url) => {
    const client = new Redis(url);
    client.on('error', () => {}); // refused connections while a node is down
    return client;
  });
  await Promise.all(clients.map((client) => new Promise((resolve) => client.once('ready', resolve))));
  return { clients, close: () => clients.forEach((client) => client.disconnect()) };
});
