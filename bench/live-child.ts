// Child process for the live-decision bench: the webhook server (startWebhookServer, HTTPS) on a
// config whose target is a real etcd, so the load generator in the parent does not share its
// event loop. Every live evaluation is stored, so the store's writes count the evaluations that
// ran. Reports its URL over IPC once its cache is ready, then answers 'stats' with the count, the
// connections it keeps and its open sockets (from /proc/self/fd).
import { readFileSync } from 'node:fs';
import { createStore } from '../functions/adapters/store-factory.js';
import { parseGuardConfig } from '../functions/domain/config.js';
import { createLogger } from '../functions/shared/logger.js';
import { openSockets } from '../test/harness/sockets.js';
import { startWebhookServer } from '../webhook/server/main.js';

const [configFile, certFile, keyFile] = process.argv.slice(2);
if (!configFile || !certFile || !keyFile) {
  process.stderr.write('usage: live-child.ts CONFIG TLS_CERT TLS_KEY\n');
  process.exit(2);
}
const config = parseGuardConfig(JSON.parse(readFileSync(configFile, 'utf8')) as unknown, configFile);
const inner = createStore(config.store);
let evaluations = 0;
const store = Object.assign(Object.create(inner) as typeof inner, {
  write: (evaluation: Parameters<typeof inner.write>[0]) => {
    evaluations += 1;
    return inner.write(evaluation);
  },
});
const server = await startWebhookServer({
  config,
  store,
  host: '127.0.0.1',
  port: 0,
  tls: { certFile, keyFile },
  token: null,
  logger: createLogger({ env: { LOG_LEVEL: 'silent' } }),
  pollIntervalMs: 60_000,
});
process.on('message', (message) => {
  if (message === 'stats') process.send?.({ evaluations, connections: server.connections(), sockets: openSockets() });
});
await server.cache.whenReady();
process.send?.({ url: server.url });
