// Types of bin/node-flags.mjs (plain JavaScript: the launcher runs it before anything is compiled).
export declare const DEFAULT_OLD_SPACE_MIB: number;
export declare const OLD_SPACE_SHARE_OF_LIMIT: number;
export declare const MIN_OLD_SPACE_MIB: number;
export declare const MAX_OLD_SPACE_MIB: number;
export declare const WEBHOOK_SEMI_SPACE_MIB: number;
export declare function parseCgroupMemoryLimit(text: string | undefined, hostBytes: number): number | null;
export declare function memoryLimitBytes(texts: { v2?: string; v1?: string; env?: string }, hostBytes: number): number | null;
export declare function oldSpaceMiB(limitBytes: number | null): number;
export declare function nodeFlagsFor(input: {
  command: string | undefined;
  limitBytes: number | null;
  execArgv: readonly string[];
  nodeOptions: string | undefined;
  /** Called only when a cap is in question (reading it loads node:v8). */
  heapLimitMiB?: number | (() => number);
}): string[];
export declare function readMemoryLimitBytes(env: NodeJS.ProcessEnv): number | null;
