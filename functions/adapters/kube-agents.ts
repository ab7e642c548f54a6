// Keep-alive connections to the API servers client-node talks to. client-node 1.x builds a new
// http(s).Agent for every request (KubeConfig.applySecurityAuthentication), so every call opened
// a connection of its own: against a TLS management API server a handshake per Secret read and
// Machine list, three per Cluster API evaluation. Here the agent it built is swapped for a kept
// keep-alive agent with the very same options (CA, client certificate and key, server name,
// rejectUnauthorized): TLS verification stays exactly what client-node set up, and only requests
// with the same trust and identity ever share a socket (Node's agent also keys its pools by them).
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import {
  IsomorphicFetchHttpLibrary,
  wrapHttpLibrary,
  type HttpLibrary,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import { tlsMaterialDigest } from './tls-digest.js';

// Requests never queue for a socket (no maxSockets): node-fetch 2, which client-node sends with,
// fails a chunked answer with "Premature close" when its socket was handed to a request queued on
// the agent before the answer's close event. How many run at once is the callers' bound (the
// evaluation's own requests, the run's concurrency); what is kept is bounded below.
export interface KubeAgentLimits {
  /** Idle sockets kept per API server; more are closed when their request ends. */
  maxFreeSockets: number;
  /** An idle socket is closed after this long (sooner when the server announces a shorter keep-alive). */
  idleTimeoutMs: number;
  /** Agents kept (one per trust and identity); the least recently used is let go beyond this. */
  maxAgents: number;
}

/**
 * Below kube-apiserver's own idle timeout (90 s) and common load balancers', so the server never
 * closes a socket just as it is reused; long enough to span a webhook's bursts of evaluations.
 */
export const DEFAULT_KUBE_AGENT_LIMITS: KubeAgentLimits = {
  maxFreeSockets: 16,
  idleTimeoutMs: 30_000,
  maxAgents: 32,
};

/** The options that decide whom a socket trusts and who it is: what a kept agent is known by. */
const IDENTITY_OPTIONS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername', 'crl'] as const;

function identityKey(protocol: string, options: Record<string, unknown>): string {
  const identity: Record<string, unknown> = { protocol };
  for (const name of IDENTITY_OPTIONS) identity[name] = options[name];
  return tlsMaterialDigest(identity);
}

/** Set while a request is handed to an agent: told whether it went out on a kept socket. */
let sending: { reused: boolean } | null = null;

// Agent.reuseSocket is called, synchronously inside the request's creation, when a kept socket is
// handed to it: the only place a request is known to ride a socket an earlier one used.
class KeptHttpAgent extends http.Agent {
  override reuseSocket(socket: Duplex, request: http.ClientRequest): void {
    if (sending !== null) sending.reused = true;
    super.reuseSocket(socket, request);
  }
}

class KeptHttpsAgent extends https.Agent {
  override reuseSocket(socket: Duplex, request: http.ClientRequest): void {
    if (sending !== null) sending.reused = true;
    super.reuseSocket(socket, request);
  }
}

const fetchLibrary = new IsomorphicFetchHttpLibrary();

/**
 * client-node's own request path (node-fetch), with one retry: a GET that failed with ECONNRESET
 * on a kept socket is sent once more, on another socket. A server closes an idle keep-alive
 * socket when it likes (kube-apiserver, a load balancer); a request written just as it does meets
 * a reset with nothing read, and a GET is safe to send again. Other verbs are never sent twice,
 * nor is a GET whose socket was new (the server itself refused it) or whose caller gave up.
 */
async function sendRetryingResetGets(request: RequestContext): Promise<ResponseContext> {
  const once = async () => {
    const told = { reused: false };
    sending = told;
    let response: Promise<ResponseContext>;
    try {
      // IsomorphicFetchHttpLibrary calls node-fetch, which creates the request, at once.
      response = fetchLibrary.send(request).toPromise();
    } finally {
      sending = null;
    }
    return { response, reused: () => told.reused };
  };
  const first = await once();
  try {
    return await first.response;
  } catch (error) {
    const retry =
      first.reused() &&
      request.getHttpMethod() === 'GET' &&
      (error as { code?: unknown } | null)?.code === 'ECONNRESET' &&
      request.getSignal()?.aborted !== true;
    if (!retry) throw error;
    return (await once()).response;
  }
}

/** The HTTP library callKube sends with (kube.ts): client-node's, retrying a GET reset on a kept socket. */
export const retryingHttpLibrary: HttpLibrary = wrapHttpLibrary({ send: sendRetryingResetGets });

/** Kept keep-alive agents, one per protocol and TLS identity, bounded by `limits`. */
export class KeptKubeAgents {
  private readonly agents = new Map<string, http.Agent>();

  constructor(readonly limits: KubeAgentLimits = DEFAULT_KUBE_AGENT_LIMITS) {}

  /**
   * The kept agent standing in for `built`, the one client-node made for a request. Agents of any
   * other class (the proxy agents client-node makes for a cluster's proxy-url) are left as they are.
   */
  keptFor<A extends http.Agent | https.Agent>(built: A): http.Agent | https.Agent {
    const isHttps = built.constructor === https.Agent;
    if (!isHttps && built.constructor !== http.Agent) return built;
    const options = (built as https.Agent).options as Record<string, unknown>;
    const key = identityKey(isHttps ? 'https' : 'http', options);
    const kept = this.agents.get(key);
    if (kept !== undefined) {
      // Most recently used last: the first key is the one to let go.
      this.agents.delete(key);
      this.agents.set(key, kept);
      return kept;
    }
    const { maxFreeSockets, idleTimeoutMs } = this.limits;
    // `timeout` closes a socket idle in the free list (Node's agent destroys only free ones on it).
    const keepAlive = { keepAlive: true, maxFreeSockets, timeout: idleTimeoutMs, scheduling: 'lifo' as const };
    const agent = isHttps ? new KeptHttpsAgent({ ...options, ...keepAlive }) : new KeptHttpAgent({ ...options, ...keepAlive });
    this.agents.set(key, agent);
    const oldest = this.agents.keys().next().value;
    // Let go, not destroyed: its requests in flight finish, its idle sockets time out.
    if (this.agents.size > this.limits.maxAgents && oldest !== undefined) this.agents.delete(oldest);
    return agent;
  }

  /** Open sockets of the kept agents (in use and idle), for tests and benchmarks. */
  sockets(): { active: number; idle: number } {
    let active = 0;
    let idle = 0;
    for (const agent of this.agents.values()) {
      for (const list of Object.values(agent.sockets)) active += list?.length ?? 0;
      for (const list of Object.values(agent.freeSockets)) idle += list?.length ?? 0;
    }
    return { active, idle };
  }

  /** Closes every kept socket; later requests open new ones. */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

/** The process's kept agents: every KubeConfig loadKubeConfig returns uses them unless told otherwise. */
export const processKubeAgents = new KeptKubeAgents();
