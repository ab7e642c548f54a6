// The current set of targets for a long-running deployable (the webhook): the static ones at once,
// the discovered ones after each discovery round, refreshed every discovery.refreshSeconds. A
// provider that fails a round keeps its previous targets (an apiserver blip must not unguard a
// fleet); a target that disappears from a successful round is dropped, so it is no longer
// evaluated and its last evaluation simply ages out. Until a provider has listed once, every object
// in its scope is unresolved (see fleet()): the webhook denies its guarded changes rather than
// judging them by a static target.
import type { GuardConfig } from '../domain/config.js';
import type { DiscoveryProblem, FleetView, Target, TargetSource } from '../domain/targets.js';
import { resolveTargets, staticTargets, type DiscoveryFailure, type ResolvedTargets } from './resolve-targets.js';
import { scopeOf } from '../domain/kinds/discovery-common.js';
import { discoverableKinds } from '../domain/kinds/registry.js';

export interface TargetRegistryOptions {
  /** One discovery round; resolveTargets against the management cluster by default. */
  resolve?: (config: GuardConfig) => Promise<ResolvedTargets>;
  /** Called after a round that changed the set of target names. */
  onChange?: (targets: readonly Target[]) => void;
  /** Called after every round with what it could not do. */
  onRound?: (round: { problems: DiscoveryProblem[]; failures: DiscoveryFailure[] }) => void;
}

export class TargetRegistry {
  private current: Target[];
  private lastProblems: DiscoveryProblem[] = [];
  private readonly listed = new Set<Exclude<TargetSource, 'static'>>();
  private lastFailures: DiscoveryFailure[] = [];
  private timer: NodeJS.Timeout | null = null;
  private round: Promise<void> | null = null;

  constructor(
    private readonly config: GuardConfig,
    private readonly options: TargetRegistryOptions = {},
  ) {
    this.current = staticTargets(config);
  }

  all(): readonly Target[] {
    return this.current;
  }

  get(name: string): Target | undefined {
    return this.current.find((target) => target.name === name);
  }

  names(): string[] {
    return this.current.map((target) => target.name);
  }

  problems(): readonly DiscoveryProblem[] {
    return this.lastProblems;
  }

  failures(): readonly DiscoveryFailure[] {
    return this.lastFailures;
  }

  /** Which providers have listed at least once, and what they could not resolve. */
  fleet(): FleetView {
    return { listed: this.listed, problems: this.lastProblems };
  }

  /** One discovery round (rounds never overlap: a call during a round shares it). */
  refresh(): Promise<void> {
    if (this.config.discovery === undefined) return Promise.resolve();
    this.round ??= this.runRound().finally(() => (this.round = null));
    return this.round;
  }

  private async runRound(): Promise<void> {
    const resolve = this.options.resolve ?? ((config: GuardConfig) => resolveTargets(config));
    const resolved = await resolve(this.config);
    const failed = new Set<string>(resolved.failures.map((failure) => failure.source));
    const kept = failed.has('discovery')
      ? this.current.filter((target) => target.source !== 'static')
      : this.current.filter((target) => failed.has(target.source));
    const names = new Set(resolved.targets.map((target) => target.name));
    const next = [...resolved.targets, ...kept.filter((target) => !names.has(target.name))];
    const changed = next.map((target) => target.name).join('\n') !== this.names().join('\n');
    this.current = next;
    // A provider that failed this round keeps its previous problems, as it keeps its targets.
    const keptProblems = this.lastProblems.filter((problem) => failed.has('discovery') || failed.has(problem.source));
    this.lastProblems = [...resolved.problems, ...keptProblems];
    for (const { discovery } of discoverableKinds()) {
      const { source } = discovery;
      if (scopeOf(this.config.discovery, source) !== undefined && !failed.has(source) && !failed.has('discovery'))
        this.listed.add(source);
    }
    this.lastFailures = resolved.failures;
    this.options.onRound?.({ problems: resolved.problems, failures: resolved.failures });
    if (changed) this.options.onChange?.(next);
  }

  /** Refreshes every discovery.refreshSeconds until stop(); no-op without discovery. */
  start(): void {
    const discovery = this.config.discovery;
    if (discovery === undefined || this.timer !== null) return;
    this.timer = setInterval(() => void this.refresh(), discovery.refreshSeconds * 1000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.round;
  }
}
