// The two duration forms etcd-guard reads, in one place:
// - parseDurationMs: what users write in the config file and on the command line ("2s", "500ms");
// - parseGoDurationMs: Go's time.Duration text, which kube-apiserver puts in a webhook's ?timeout=.

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1, us: 0.001, µs: 0.001, ns: 0.000001 };

const USER_DURATION = /^(\d+(?:\.\d+)?)(ms|s|m)$/;
const GO_DURATION_PART = /(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)/gy;

/** Parses a user's "250ms", "2s", "1.5s", "1m" into whole milliseconds; null when not such a positive duration. */
export function parseDurationMs(text: string): number | null {
  const match = USER_DURATION.exec(text.trim());
  if (!match) return null;
  const ms = Math.round(Number(match[1]) * (UNIT_MS[match[2] ?? ''] ?? Number.NaN));
  return ms > 0 ? ms : null;
}

/** Parses a Go duration as kube-apiserver sends it ("10s", "1m0s", "500ms") into milliseconds; null if malformed. */
export function parseGoDurationMs(text: string): number | null {
  if (text.length === 0 || text.length > 32) return null;
  GO_DURATION_PART.lastIndex = 0;
  let total = 0;
  let consumed = 0;
  for (let match = GO_DURATION_PART.exec(text); match !== null; match = GO_DURATION_PART.exec(text)) {
    total += Number(match[1]) * (UNIT_MS[match[2] ?? ''] ?? Number.NaN);
    consumed = GO_DURATION_PART.lastIndex;
  }
  return consumed === text.length && Number.isFinite(total) ? total : null;
}
