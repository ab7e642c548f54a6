// How members, sizes and ages read in reasons: one wording for every check.
import type { JudgedMember } from './cluster-view.js';
import { hexId } from '../member-view.js';
import type { DiscoveredMember } from '../../ports/etcd-probe.js';

export const MIB = 1024 * 1024;

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * MIB) return `${(bytes / (1024 * MIB)).toFixed(1)} GiB`;
  return `${(bytes / MIB).toFixed(1)} MiB`;
}

export function hostOf(url: string): string | null {
  try {
    // URL keeps IPv6 hosts in brackets; node addresses carry none.
    return new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return null;
  }
}

export function label(member: Pick<JudgedMember, 'name' | 'id' | 'endpoint'>): string {
  const who = member.name !== '' ? member.name : member.id !== '' ? `id ${member.id}` : '';
  if (who === '') return member.endpoint !== '' ? member.endpoint : 'unnamed member';
  return member.endpoint !== '' ? `${who} (${member.endpoint})` : who;
}

/** "member X (endpoint) <what>: <error>", without repeating an endpoint the error already names. */
export function memberProblem(kind: 'member' | 'learner', member: JudgedMember, what: string, error: string): string {
  const who = member.name !== '' ? member.name : member.id !== '' ? `id ${member.id}` : '';
  const named = member.endpoint !== '' && error.includes(member.endpoint);
  if (who === '') {
    const cause = named && error.startsWith(`${member.endpoint}: `) ? error.slice(member.endpoint.length + 2) : error;
    return `${kind} ${member.endpoint || 'unnamed member'} ${what}: ${cause}`;
  }
  return named || member.endpoint === ''
    ? `${kind} ${who} ${what}: ${error}`
    : `${kind} ${who} (${member.endpoint}) ${what}: ${error}`;
}

/** Who answered a list, by name when the cluster's view knows the member. */
export function answeredBy(endpoint: string, memberId: string, members: readonly JudgedMember[]): string {
  const member = members.find((candidate) => candidate.id === memberId);
  return member !== undefined && member.name !== '' ? `member ${member.name} (${endpoint})` : `endpoint ${endpoint}`;
}

export function listedNames(list: readonly DiscoveredMember[]): string {
  return list
    .map((member) => member.name || hexId(member.id))
    .sort()
    .join(', ');
}

export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

export function formatAge(ms: number): string {
  return ms >= 120_000 ? `${Math.round(ms / 60_000)}m` : `${Math.round(ms / 1000)}s`;
}

export function nameOf(members: readonly JudgedMember[], id: string): string {
  const member = members.find((candidate) => candidate.id === id);
  return member && member.name !== '' ? member.name : `id ${id}`;
}
