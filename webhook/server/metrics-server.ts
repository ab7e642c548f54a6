// The metrics port: plain HTTP serving GET /metrics and nothing else, apart from the admission
// port, which is left to the API server. Per-target series name every target, so they are never
// served on the admission port: the NetworkPolicy component lets only the monitoring namespace
// reach this one (manifests/components/network-policies).
import http from 'node:http';
import type { Logger } from '../../functions/shared/logger.js';
import { monotonicNowMs } from '../../functions/domain/deadline.js';
import { limitConnections, peerKey } from './connections.js';
import type { WebhookMetrics } from './metrics.js';

/** Scrapers send small GETs; anything slower than this is cut (Prometheus' own timeout is 10 s). */
export const METRICS_CONNECTION_BOUNDS = {
  headersTimeout: 10_000,
  requestTimeout: 15_000,
  keepAliveTimeout: 5_000,
  connectionsCheckingInterval: 1_000,
} as const;
/** A few scrapers at once; the bound keeps a flood on this port from costing the admission port file descriptors. */
export const METRICS_MAX_CONNECTIONS = 32;
/**
 * One address's share of them (Prometheus HA pairs scrape from one address each): idle sockets
 * from one or a few addresses cannot hold the port, and when it is full the address holding the
 * most gives up its oldest connection to one holding fewer (connections.ts).
 */
export const METRICS_MAX_CONNECTIONS_PER_PEER = 8;
/** A connection that sends nothing, or idles between scrapes, for this long is cut. */
export const METRICS_IDLE_TIMEOUT_MS = 5_000;
/**
 * One address's scrapes are answered at most this often; one that comes sooner waits for its
 * turn. Prometheus scrapes every 10 s or more; a client that loops would otherwise have every
 * body of a large fleet built and copied out on the event loop that answers admission reviews.
 */
export const METRICS_PEER_INTERVAL_MS = 1_000;

/** Runs each peer's scrapes at most once per METRICS_PEER_INTERVAL_MS, in arrival order. */
function pacePerPeer(handler: http.RequestListener): http.RequestListener {
  const nextTurn = new Map<string, number>();
  return (req, res) => {
    const now = monotonicNowMs();
    if (nextTurn.size > METRICS_MAX_CONNECTIONS) for (const [peer, at] of nextTurn) if (at <= now) nextTurn.delete(peer);
    const peer = peerKey(req.socket.remoteAddress);
    const turn = Math.max(now, nextTurn.get(peer) ?? 0);
    nextTurn.set(peer, turn + METRICS_PEER_INTERVAL_MS);
    if (turn <= now) return handler(req, res);
    const timer = setTimeout(() => handler(req, res), turn - now);
    res.once('close', () => clearTimeout(timer));
  };
}

function metricsHandler(metrics: WebhookMetrics, logger: Logger): http.RequestListener {
  return (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('only GET /metrics is served on this port\n');
      return;
    }
    metrics
      .renderChunks()
      .then((chunks) => {
        res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
        // Written as they come: the per-target part is a Buffer reused across scrapes, not re-encoded each time.
        if (req.method !== 'HEAD') for (const chunk of chunks) res.write(chunk);
        res.end();
      })
      .catch((error: unknown) => {
        logger.error({ err: error instanceof Error ? error.message : String(error) }, 'rendering metrics failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('rendering metrics failed\n');
      });
  };
}

/** Listens on host:port (rejecting on e.g. EADDRINUSE); the caller closes the returned server. */
export async function startMetricsServer(
  metrics: WebhookMetrics,
  listen: { host: string; port: number },
  logger: Logger,
): Promise<http.Server> {
  const server = http.createServer(METRICS_CONNECTION_BOUNDS, pacePerPeer(metricsHandler(metrics, logger)));
  limitConnections(server, { maxConnections: METRICS_MAX_CONNECTIONS, maxPerPeer: METRICS_MAX_CONNECTIONS_PER_PEER });
  server.setTimeout(METRICS_IDLE_TIMEOUT_MS);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (error) => logger.error({ err: error.message }, 'metrics server error'));
  server.on('clientError', (_error, socket) => socket.destroy());
  return server;
}
