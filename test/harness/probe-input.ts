// What the probes of a three-member cluster saw, for tests of the pure judgement: every member
// answers unless `failed` says how its Status and linearizable read failed.
import type { EndpointProbe } from '../../functions/ports/etcd-probe.js';
import type { EvaluationInput } from '../../functions/domain/judgement/input.js';
import type { Failed } from '../../functions/domain/probe-failure.js';

export const PROBED_IDS = ['1', '2', '3'] as const;

export function probedEndpoint(id: string): string {
  return `https://10.0.0.${id}:2379`;
}

export function probedThree(
  failed: Readonly<Record<string, Failed | undefined>> = {},
  evaluatedAt = '2026-01-02T03:04:05.000Z',
): EvaluationInput {
  const probes: EndpointProbe[] = PROBED_IDS.map((id) => {
    const failure = failed[id];
    const endpoint = probedEndpoint(id);
    if (failure !== undefined) {
      return { endpoint, status: failure, alarms: { ok: true, value: [] }, linearizableRead: failure, latencyMs: null };
    }
    const value = {
      memberId: id,
      leaderId: '1',
      raftIndex: 10,
      raftTerm: 2,
      dbSizeBytes: 1024,
      dbSizeInUseBytes: 1024,
      version: '3.5.17',
      isLearner: false,
    };
    return {
      endpoint,
      status: { ok: true, value },
      alarms: { ok: true, value: [] },
      linearizableRead: { ok: true, value: null },
      latencyMs: 2,
    };
  });
  return {
    target: 'prod',
    endpoints: [probedEndpoint('1')],
    memberList: {
      ok: true,
      value: PROBED_IDS.map((id) => ({
        id,
        name: `etcd-${id}`,
        peerUrls: [`https://10.0.0.${id}:2380`],
        clientUrls: [probedEndpoint(id)],
        isLearner: false,
      })),
    },
    probes,
    quotaBackendBytes: 100 * 1024 * 1024,
    evaluatedAt,
    durationMs: 5,
  };
}
