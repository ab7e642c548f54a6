// KCP's scale-down pick as Cluster API v1.14 makes it (the CAPI_VERSION in scripts/versions.env):
// selectMachineForInPlaceUpdateOrScaleDown in
// controlplane/kubeadm/reconcilers/kubeadmcontrolplane/scale.go, MachineInFailureDomainWithMostMachines
// and FailureDomainWithMostMachines in controlplane/kubeadm/pkg/control_plane.go, PickMost in
// util/failuredomains/failure_domains.go, Machines.Oldest in util/collections. The first table
// replays TestSelectMachineForInPlaceUpdateOrScaleDown (scale_test.go) row by row, named as there;
// the second walks whole removals with 1, 2 and 3 failure domains and an outdated tier. Where the
// webhook cannot see what KCP will see (component health at pick time, the Cluster's domains,
// outdatedness), a row says the pick stays open.
import { describe, expect, it } from 'vitest';
import type { MemberReport } from '../../functions/domain/evaluation-document.js';
import type { ControlPlaneMachine } from '../../functions/domain/machines.js';
import { kcpPossiblePicks, kcpRemovalOrder, type KcpPickFacts } from './removal.js';
import { controlPlaneMachine, KCP_COMPONENTS } from '../../test/harness/control-plane-machines.js';
import { makeMember } from '../../test/harness/evaluation-fixture.js';

const START = Date.parse('2000-01-01T01:00:00Z');
interface Spec {
  name: string;
  domain: string | null;
  /** Hours from 2000-01-01T01:00Z, as scale_test.go's withTimestamp(startDate.Add(...)). */
  hours: number;
  annotated?: boolean;
  /** A component condition False (withUnhealthyAPIServerPod / withUnhealthyEtcdMember). */
  unhealthy?: string;
  version?: string;
}

/** A Machine as the apiserver serves it (v1beta2), with a Node named after it and KCP's conditions. */
function machine(spec: Spec): ControlPlaneMachine {
  return controlPlaneMachine({
    name: spec.name,
    created: new Date(START + spec.hours * 3_600_000).toISOString().replace('.000Z', 'Z'),
    node: spec.name,
    version: spec.version ?? 'v1.34.2',
    ...(spec.domain === null ? {} : { failureDomain: spec.domain }),
    ...(spec.annotated === true ? { annotated: true } : {}),
    conditions: KCP_COMPONENTS.map((type) => ({ type, status: type === spec.unhealthy ? 'False' : 'True' })),
  });
}

// The Machines of TestSelectMachineForInPlaceUpdateOrScaleDown, same names, domains and ages.
const m = {
  1: machine({ name: 'machine-1', domain: 'one', hours: 1 }),
  2: machine({ name: 'machine-2', domain: 'one', hours: -3 }),
  3: machine({ name: 'machine-3', domain: 'one', hours: -4 }),
  4: machine({ name: 'machine-4', domain: 'two', hours: -1 }),
  5: machine({ name: 'machine-5', domain: 'two', hours: -2 }),
  6: machine({ name: 'machine-6', domain: 'two', hours: -7 }),
  7: machine({ name: 'machine-7', domain: 'two', hours: -5, annotated: true }),
  8: machine({ name: 'machine-8', domain: 'two', hours: -6, annotated: true }),
  9: machine({ name: 'machine-9', domain: 'two', hours: -5 }),
  10: machine({ name: 'machine-10', domain: 'two', hours: -4, unhealthy: 'APIServerPodHealthy' }),
  11: machine({ name: 'machine-11', domain: 'two', hours: -3, unhealthy: 'EtcdMemberHealthy' }),
};
const needsUpgrade = [m[1], m[2], m[3], m[4], m[5]];
const upToDate = [m[1], m[2], m[3], m[4]];
const annotatedPlane = [m[6], m[7], m[8]];
const needsUpgrade1 = [m[9], m[10], m[11]];

/** KCP's knowledge in the Go test: which Machines are outdated, and the Cluster's domains one and two. */
const known = (outdated: readonly ControlPlaneMachine[]): KcpPickFacts => ({
  outdated: (candidate) => outdated.includes(candidate),
  failureDomains: ['one', 'two'],
});

const names = (machines: readonly ControlPlaneMachine[]) => machines.map((found) => found.name).sort();

describe('TestSelectMachineForInPlaceUpdateOrScaleDown, row by row (selectMachineForInPlaceUpdateOrScaleDown)', () => {
  const rows: { name: string; machines: ControlPlaneMachine[]; outdated: ControlPlaneMachine[]; kcp: string; gate: string[] }[] =
    [
      {
        name: 'when there are machines needing upgrade, it returns the oldest machine in the failure domain with the most machines needing upgrade',
        machines: needsUpgrade,
        outdated: [m[5]],
        kcp: 'machine-5',
        // Outdated machine-5 is the whole eligible set; its components all True now, but they may not be when KCP picks.
        gate: ['machine-5'],
      },
      {
        name: 'when there are no outdated machines, it returns the oldest machine in the largest failure domain',
        machines: upToDate,
        outdated: [],
        kcp: 'machine-3',
        gate: ['machine-3'],
      },
      {
        name: 'when there is a single machine marked with delete annotation key in machine collection, it returns only that marked machine',
        machines: annotatedPlane,
        outdated: [m[6], m[7]],
        kcp: 'machine-7',
        gate: ['machine-7'],
      },
      {
        name: 'when there are machines marked with delete annotation key in machine collection, it returns the oldest marked machine first',
        machines: annotatedPlane,
        outdated: [m[7], m[8]],
        kcp: 'machine-8',
        gate: ['machine-8'],
      },
      {
        name: 'when there are annotated machines which are part of the annotatedControlPlane but not in outdatedMachines, it returns the oldest marked machine first',
        machines: annotatedPlane,
        outdated: [],
        kcp: 'machine-8',
        gate: ['machine-8'],
      },
      {
        name: 'when there are machines needing upgrade, it returns the single unhealthy machine with MachineAPIServerPodHealthyCondition set to False',
        machines: needsUpgrade1,
        outdated: [m[9], m[10]],
        kcp: 'machine-10',
        // Stricter: machine-10's API server may be healthy again when KCP picks, and then the oldest outdated one goes.
        gate: ['machine-10', 'machine-9'],
      },
      {
        name: 'when there are machines needing upgrade, it returns the oldest unhealthy machine with MachineEtcdMemberHealthyCondition set to False',
        machines: needsUpgrade1,
        outdated: [m[9], m[10], m[11]],
        kcp: 'machine-10',
        gate: ['machine-10', 'machine-11', 'machine-9'],
      },
    ];
  // Two Go rows are not replayed: their outdated set names Machines outside the control plane
  // (machine-7 and machine-8 with needsUpgradeControlPlane / upToDateControlPlane), which the
  // webhook never meets: it reads outdatedness off the control plane's own Machines.
  it.each(rows)('$name', ({ machines, outdated, kcp, gate }) => {
    const picks = names(kcpPossiblePicks(machines, known(outdated)));
    expect(picks).toContain(kcp);
    expect(picks).toEqual([...gate].sort());
  });
});

/** Members named after the Machines' Nodes; those in `dead` unreachable. */
function membersOf(machines: readonly ControlPlaneMachine[], dead: readonly string[] = []): MemberReport[] {
  return machines.map((found, index) =>
    makeMember(index, { name: found.name, ...(dead.includes(found.name) ? { healthy: false, leader: false } : {}) }),
  );
}

describe('whole removals with 1, 2 and 3 failure domains and an outdated tier (kcpRemovalOrder)', () => {
  const at = (name: string, domain: string | null, hours: number, extra: Partial<Spec> = {}) =>
    machine({ name, domain, hours, ...extra });

  it('1 domain: the oldest goes first, a creation-time tie goes by name (Machines.Oldest)', () => {
    const machines = [at('cp-b', 'fd-a', -2), at('cp-a', 'fd-a', -2), at('cp-c', 'fd-a', 0)];
    const plan = kcpRemovalOrder(membersOf(machines, ['cp-a']), machines, 2, 3, {
      outdated: () => false,
      failureDomains: ['fd-a'],
    });
    expect(plan).toMatchObject({ order: ['unhealthy'], determined: true });
    expect(plan.firstPick?.name).toBe('cp-a');
  });

  it('1 domain, the Cluster unread: every subset of the one domain gives the same pick (FailureDomainWithMostMachines)', () => {
    const machines = [at('cp-0', 'fd-a', -3), at('cp-1', 'fd-a', -2), at('cp-2', 'fd-a', -1)];
    const plan = kcpRemovalOrder(membersOf(machines, ['cp-0']), machines, 2, 3, { outdated: () => false });
    expect(plan).toMatchObject({ order: ['unhealthy'], determined: true });
  });

  it('2 domains: the domain with most Machines gives its oldest, not the oldest overall (PickMost)', () => {
    const machines = [at('cp-0', 'fd-b', -9), at('cp-1', 'fd-a', -2), at('cp-2', 'fd-a', -1)];
    const facts = { outdated: () => false, failureDomains: ['fd-a', 'fd-b'] };
    const plan = kcpRemovalOrder(membersOf(machines, ['cp-1']), machines, 2, 3, facts);
    expect(plan).toMatchObject({ order: ['unhealthy'], determined: true });
    expect(plan.firstPick?.name).toBe('cp-1');
    // Without the Cluster's domains, fd-a may be gone from it: then cp-1 and cp-2 go first, else cp-0 could.
    expect(names(kcpPossiblePicks(machines, { outdated: () => false }))).toEqual(['cp-0', 'cp-1']);
  });

  it('2 domains: a Machine in a domain the Cluster no longer lists goes first (FailureDomainWithMostMachines)', () => {
    const machines = [at('cp-0', 'fd-old', 0), at('cp-1', 'fd-a', -5), at('cp-2', 'fd-a', -4)];
    const plan = kcpRemovalOrder(membersOf(machines, ['cp-0']), machines, 2, 3, {
      outdated: () => false,
      failureDomains: ['fd-a', 'fd-b'],
    });
    expect(plan).toMatchObject({ order: ['unhealthy'], determined: true });
  });

  it('3 domains, one Machine each: PickMost ties and Go map order decides, so the pick is open', () => {
    const machines = [at('cp-0', 'fd-a', -3), at('cp-1', 'fd-b', -2), at('cp-2', 'fd-c', -1)];
    const plan = kcpRemovalOrder(membersOf(machines, ['cp-0']), machines, 2, 3, {
      outdated: () => false,
      failureDomains: ['fd-a', 'fd-b', 'fd-c'],
    });
    expect(plan.determined).toBe(false);
    expect(plan.orders).toEqual(expect.arrayContaining([['unhealthy'], ['healthy']]));
  });

  it('3 domains, 5→3: fd-a has most, twice; a three-way tie after that is open but removes a healthy member either way', () => {
    const machines = [
      at('cp-0', 'fd-a', -5),
      at('cp-1', 'fd-a', -4),
      at('cp-2', 'fd-a', -3),
      at('cp-3', 'fd-b', -9),
      at('cp-4', 'fd-c', -8),
    ];
    const facts = { outdated: () => false, failureDomains: ['fd-a', 'fd-b', 'fd-c'] };
    // fd-a (3) goes first: cp-0; then fd-a has 2, fd-b 1, fd-c 1: cp-1.
    const plan = kcpRemovalOrder(membersOf(machines, ['cp-0', 'cp-1']), machines, 3, 5, facts);
    expect(plan).toMatchObject({ order: ['unhealthy', 'unhealthy'], determined: true });
    // 5→2: the third step finds fd-a, fd-b and fd-c at one each (open), all healthy: the kind is determined.
    expect(kcpRemovalOrder(membersOf(machines, ['cp-0', 'cp-1']), machines, 2, 5, facts).order).toEqual([
      'unhealthy',
      'unhealthy',
      'healthy',
    ]);
  });

  it('outdated tier, 3 domains: the outdated Machine goes before the older up-to-date ones (MachinesNeedingRollout)', () => {
    const machines = [
      at('cp-0', 'fd-a', -9),
      at('cp-1', 'fd-b', -8),
      at('cp-2', 'fd-c', -7),
      at('cp-3', 'fd-a', -1, { version: 'v1.33.0' }),
    ];
    const facts: KcpPickFacts = {
      outdated: (candidate) => candidate.version !== 'v1.34.2',
      failureDomains: ['fd-a', 'fd-b', 'fd-c'],
    };
    const plan = kcpRemovalOrder(membersOf(machines, ['cp-3']), machines, 3, 4, facts);
    expect(plan).toMatchObject({ order: ['unhealthy'], determined: true });
    expect(plan.firstPick?.name).toBe('cp-3');
    // Outdatedness unknown: any of them may be the only outdated one, so any may be the pick.
    expect(names(kcpPossiblePicks(machines, { failureDomains: facts.failureDomains }))).toEqual(['cp-0', 'cp-1', 'cp-2', 'cp-3']);
  });

  it('outdated tier: among outdated Machines, the domain with most outdated ones, not most Machines (countPriority)', () => {
    const machines = [
      at('cp-0', 'fd-a', -9, { version: 'v1.33.0' }),
      at('cp-1', 'fd-b', -8, { version: 'v1.33.0' }),
      at('cp-2', 'fd-b', -7, { version: 'v1.33.0' }),
      at('cp-3', 'fd-a', -1),
      at('cp-4', 'fd-a', -1),
    ];
    const facts: KcpPickFacts = {
      outdated: (candidate) => candidate.version !== 'v1.34.2',
      failureDomains: ['fd-a', 'fd-b', 'fd-c'],
    };
    expect(names(kcpPossiblePicks(machines, facts))).toEqual(['cp-1']);
  });
});
