// The port between an evaluation and the way it reaches one etcd cluster: the use cases open an
// access (functions/usecases/etcd-access.ts for static targets), the Cluster API and druid
// adapters implement it for discovered ones.
import type { Deadline } from '../domain/deadline.js';
import type { ControlPlaneNode, DiscoveredMember } from './etcd-probe.js';

export interface ProbeCredentials {
  /** PEM bytes; without a CA the system roots verify https endpoints. */
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

export interface EtcdAccess {
  /** Asked for the member list and probed first (as given in the config, or one per known member). */
  readonly seedEndpoints: readonly string[];
  /** PEM bytes held in memory; never logged, stored or put into an error. */
  readonly credentials: ProbeCredentials;
  /** The endpoint that reaches a listed member, or undefined when this access has no way to it. */
  endpointFor(member: DiscoveredMember): string | undefined;
  /** Stable human text for an endpoint in reasons and member rows (never a random loopback port). */
  describe(endpoint: string): string;
  /** The TLS server name to verify for an endpoint when it is not the endpoint's host (a relay). */
  serverNameFor?(endpoint: string): string | undefined;
  /** Why the way to an endpoint failed, when the relay knows more than the etcd client saw. */
  failureDetail?(endpoint: string): string | undefined;
  /**
   * A reason that replaces the etcd client's error for an endpoint entirely: the relay never got
   * through, and how it failed must not be reported (it would answer a port scan).
   */
  unreachable?(endpoint: string): string | undefined;
  /**
   * The workload cluster's control-plane Nodes, when this access reaches its API server (Cluster
   * API): they date the Machine inventory. Bounded by `timeoutMs`; rejects on any failure.
   */
  listControlPlaneNodes?(timeoutMs: number): Promise<ControlPlaneNode[]>;
  /** Releases listeners, relays and connections; the evaluation calls it once, always. */
  close(): Promise<void>;
}

/** Opens an access before `deadline`. */
export type EtcdAccessFactory = (deadline: Deadline) => Promise<EtcdAccess>;

/**
 * An access that could not be opened for a reason about the cluster, not the config (a missing
 * Secret, an unreachable workload API server): the evaluation reports it as Unhealthy. The
 * message names what failed and never quotes secret content.
 */
export class EtcdAccessError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EtcdAccessError';
  }
}

/**
 * Endpoints that reach etcd as they are: the configured ones, and each listed member at its first
 * advertised client URL. Endpoints describe themselves.
 */
export function directEtcdAccess(endpoints: readonly string[], credentials: ProbeCredentials): EtcdAccess {
  return {
    seedEndpoints: endpoints,
    credentials,
    endpointFor: (member) => member.clientUrls[0],
    describe: (endpoint) => endpoint,
    close: () => Promise.resolve(),
  };
}
