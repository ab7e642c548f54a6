// What a check is and returns: findings that conclude into pass, warn or fail (or null: n/a).
import type { CheckStatus } from '../evaluation-document.js';
import type { ClusterView } from './cluster-view.js';

/** One failure or warning of a check; each becomes a reason. */
export interface Finding {
  status: Exclude<CheckStatus, 'pass'>;
  message: string;
}

/** What one check concluded: its findings in the order found, and the summary shown when there are none. */
export interface CheckResult {
  findings: Finding[];
  passMessage: string;
  /** When what it says was measured, for a result carried from an earlier evaluation. */
  measuredAt?: string;
}

export const fail = (message: string): Finding => ({ status: 'fail', message });
export const warn = (message: string): Finding => ({ status: 'warn', message });

export function concluded(findings: Finding[], passMessage = ''): CheckResult {
  return { findings, passMessage };
}

export type CheckFunction = (view: ClusterView) => CheckResult | null;
