// The integration suite with node-redis v4 clients, the oldest major version supported,
// at their default settings.

import { createClient } from 'redis4';

import { integrationSuite } from './suite.js';

integrationSuite('node-redis v4', 7230, async (urls) => {
  const clients = await Promise.all(
    urls.map((url) => {
      const client = createClient({ url });
      client.on('error', () => {}); // refused connections while a node is down
      return client.connect().then(() => client);
    }),
  );
  return { clients, close: () => Promise.all(clients.map((client) => client.disconnect())) };
});
