// The integration suite with node-redis clients (the current major version) at their
// default settings.

import { createClient } from 'redis';

import { integrationSuite } from './suite.js';

integrationSuite('node-redis', 7220, async (urls) => {
  const clients = await Promise.all(
    urls.map((url) => {
      const client = createClient({ url });
      client.on('error', () => {}); // refused connections while a node is down
      return client.connect();
    }),
  );
  return { clients, close: () => Promise.all(clients.map((client) => client.destroy?.() ?? client.disconnect())) };
});
