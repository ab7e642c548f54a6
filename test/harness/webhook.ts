// The webhook as the suites run it: startWebhookServer on a loopback port, HTTPS with the test
// PKI (or plain HTTP, as --insecure-http), an agent that trusts the test CA, and postReview, which
// posts an AdmissionReview to /validate and hands back the response after checking what every
// caller would check: HTTP 200, an admission.k8s.io/v1 AdmissionReview, its own uid echoed.
// close() ends the agent and the server and may be called more than once.
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { Logger } from '../../functions/shared/logger.js';
import { createLogger } from '../../functions/shared/logger.js';
import type { AdmissionResponse } from '../../webhook/domain/contract.js';
import { startWebhookServer, type RunningWebhookServer, type WebhookServerOptions } from '../../webhook/server/main.js';
import type { TestCerts } from './certs.js';
import { httpsRequest, type HttpsAnswer } from './https-client.js';
import { waitFor } from './wait.js';

export interface TestWebhookOptions extends Omit<
  WebhookServerOptions,
  'host' | 'port' | 'tls' | 'metricsListen' | 'token' | 'logger'
> {
  /** HTTPS with the server certificate of these; absent: plain HTTP. */
  certs?: TestCerts;
  /** Also serve GET /metrics on a loopback port (metricsUrl). */
  metricsPort?: boolean;
  token?: string | null;
  /** Default: silent. */
  logger?: Logger;
  /** Options of the agent the helper's requests use; default keepAlive. */
  agent?: https.AgentOptions;
  /** Wait for the cache's first load before handing the webhook over. */
  ready?: boolean;
}

export interface TestRequestOptions {
  body?: string | Buffer;
  headers?: Record<string, string>;
  /** Default 15 s. */
  timeoutMs?: number;
}

export interface PostReviewOptions {
  /** The query the apiserver adds; default `?timeout=10s`. */
  query?: string;
  timeoutMs?: number;
}

export interface TestWebhook {
  server: RunningWebhookServer;
  url: string;
  metricsUrl: string | null;
  /** The test CA (null over plain HTTP). */
  ca: Buffer | null;
  agent: https.Agent;
  /** Every response body the helper's requests received, in order (for "no secret in any answer" checks). */
  received: string[];
  request(method: string, urlPath: string, options?: TestRequestOptions): Promise<HttpsAnswer>;
  /** POST /validate; throws unless HTTP 200 with an AdmissionReview echoing the review's uid. */
  postReview(review: unknown, options?: PostReviewOptions): Promise<AdmissionResponse>;
  /** Resolves once the webhook's cache holds this stored evaluation (default deadline 5 s). */
  waitCached(evaluation: Evaluation, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const silent = createLogger({ env: { LOG_LEVEL: 'silent' } });
const DEFAULT_TIMEOUT_MS = 15_000;

export async function startTestWebhook(options: TestWebhookOptions): Promise<TestWebhook> {
  const { certs, metricsPort, token, logger, agent: agentOptions, ready, ...rest } = options;
  const server = await startWebhookServer({
    ...rest,
    host: '127.0.0.1',
    port: 0,
    tls: certs ? { certFile: certs.serverCertFile, keyFile: certs.serverKeyFile } : null,
    ...(metricsPort ? { metricsListen: { host: '127.0.0.1', port: 0 } } : {}),
    token: token ?? null,
    logger: logger ?? silent,
  });
  const ca = certs ? readFileSync(certs.caFile) : null;
  const agent = new https.Agent({ keepAlive: true, ...agentOptions });
  let closed: Promise<void> | null = null;
  const close = () => {
    closed ??= (async () => {
      agent.destroy();
      await server.close();
    })();
    return closed;
  };
  try {
    if (ready) await server.cache.whenReady();
  } catch (error) {
    await close();
    throw error;
  }
  const received: string[] = [];
  const request = async (method: string, urlPath: string, requestOptions: TestRequestOptions = {}) => {
    const answer = await requestTo(`${server.url}${urlPath}`, method, ca, agent, requestOptions);
    received.push(answer.text);
    return answer;
  };
  const postReview = async (review: unknown, reviewOptions: PostReviewOptions = {}) => {
    const answer = await request('POST', `/validate${reviewOptions.query ?? '?timeout=10s'}`, {
      body: JSON.stringify(review),
      timeoutMs: reviewOptions.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    });
    return admissionResponse(review, answer);
  };
  const waitCached = (evaluation: Evaluation, timeoutMs = 5_000) =>
    waitFor(
      `the webhook's cache to hold the evaluation of ${evaluation.target} made at ${evaluation.evaluatedAt}`,
      timeoutMs,
      () => server.cache.get(evaluation.target)?.evaluatedAt === evaluation.evaluatedAt,
    );
  return { server, url: server.url, metricsUrl: server.metricsUrl, ca, agent, received, request, postReview, waitCached, close };
}

function requestTo(
  url: string,
  method: string,
  ca: Buffer | null,
  agent: https.Agent,
  options: TestRequestOptions,
): Promise<HttpsAnswer> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (ca !== null) return httpsRequest(url, { method, agent, ca, body: options.body, headers: options.headers, timeoutMs });
  return plainRequest(url, method, options.body, options.headers, timeoutMs);
}

async function plainRequest(
  url: string,
  method: string,
  body: string | Buffer | undefined,
  headers: Record<string, string> = {},
  timeoutMs: number,
): Promise<HttpsAnswer> {
  const response = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await response.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: response.status, headers: Object.fromEntries(response.headers), text, json };
}

function admissionResponse(review: unknown, answer: HttpsAnswer): AdmissionResponse {
  if (answer.status !== 200) throw new Error(`POST /validate answered HTTP ${answer.status}: ${answer.text}`);
  const body = answer.json as { apiVersion?: unknown; kind?: unknown; response?: AdmissionResponse } | null;
  if (body?.apiVersion !== 'admission.k8s.io/v1' || body.kind !== 'AdmissionReview' || !body.response) {
    throw new Error(`POST /validate answered no admission.k8s.io/v1 AdmissionReview: ${answer.text}`);
  }
  const sentUid = (review as { request?: { uid?: unknown } } | null)?.request?.uid;
  if (typeof sentUid === 'string' && body.response.uid !== sentUid) {
    throw new Error(`POST /validate answered uid ${body.response.uid} to a review with uid ${sentUid}`);
  }
  return body.response;
}
