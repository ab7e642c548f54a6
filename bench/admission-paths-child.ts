// Child process for bench/admission-paths.ts: the webhook's request handling, built in-process
// from its parts (file store, cache, metrics, the buffered decision log on stdout), in one of the
// variants the bench compares. Reports its URL over IPC once the cache holds the target.
import { readFileSync } from 'node:fs';
import type http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { createStore } from '../functions/adapters/store-factory.js';
import { parseGuardConfig } from '../functions/domain/config.js';
import { createLogger } from '../functions/shared/logger.js';
import { OnDemandEvaluations } from '../functions/usecases/on-demand-service.js';
import { createWebhookApp, createWebhookRoutes, type WebhookAppDeps } from '../webhook/server/app.js';
import { EvaluationCache } from '../webhook/server/cache.js';
import { createWebhookMetrics } from '../webhook/server/metrics.js';

/** `handler` is "fast" (the fast-validate listener in front of express) or "express" (express alone). */
const [configFile, certFile, keyFile, handler] = process.argv.slice(2);
if (!configFile || !certFile || !keyFile || (handler !== 'fast' && handler !== 'express')) {
  process.stderr.write('usage: admission-paths-child.ts CONFIG CERT KEY fast|express\n');
  process.exit(2);
}
const config = parseGuardConfig(JSON.parse(readFileSync(configFile, 'utf8')) as unknown, configFile);
const store = createStore(config.store);
const cache = new EvaluationCache({ store, targets: config.targets.map((target) => target.name) });
await cache.pollOnce();
const onDemand = new OnDemandEvaluations({
  config,
  store,
  evaluate: () => Promise.reject(new Error('the bench runs on the cached evaluation')),
  token: null,
});
const deps: WebhookAppDeps = {
  config,
  cache,
  onDemand,
  metrics: createWebhookMetrics(),
  logger: createLogger({ env: { LOG_LEVEL: 'info' }, buffered: true }),
};
const listener: http.RequestListener = handler === 'fast' ? createWebhookApp(deps) : createWebhookRoutes(deps).app;
const server = https.createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, listener);
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.send?.({ url: `https://127.0.0.1:${port}` });
});
