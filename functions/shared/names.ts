// The DNS label rule (RFC 1123) for every name etcd-guard turns into a Kubernetes object name, a
// file name or a namespace: lowercase letters, digits and '-', starting and ending with a letter
// or digit. Such a name can never hold a path separator or "..".

export const DNS_LABEL_MAX_LENGTH = 63;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Whether `text` is a DNS label of at most `maxLength` characters. */
export function isDnsLabel(text: string, maxLength: number = DNS_LABEL_MAX_LENGTH): boolean {
  return text.length <= maxLength && DNS_LABEL.test(text);
}

/** Lowercase letters, digits, '.' and '-': the characters of node, pod and etcd member names. */
const PLAIN_NAME = /^[a-z0-9.-]*$/;
const ROOT_OR_ENGLISH_LOCALE = /^(?:(?:C|POSIX|en)(?:[._@-].*)?)?$/;

/**
 * Whether the default locale Node's ICU takes from `env` (LC_ALL, else LC_MESSAGES, else LANG)
 * is the root or an English one (C, POSIX and unset included): under those, two names of
 * lowercase letters, digits, '.' and '-' collate by code unit ('.' and '-' before digits before
 * letters, a prefix first). Other locales may not (Czech sorts "ch" after "h").
 */
export function plainNamesCollateByCodeUnit(env: Readonly<Record<string, string | undefined>>): boolean {
  return ROOT_OR_ENGLISH_LOCALE.test(env.LC_ALL || env.LC_MESSAGES || env.LANG || '');
}

/**
 * `a.localeCompare(b)`, without creating ICU's collator where it cannot change the answer: the
 * collator's first use costs an `evaluate` process a visible share of its CPU, to sort three
 * member names (BENCHMARKS.md).
 * `plainByCodeUnit` is plainNamesCollateByCodeUnit of the process's environment, read by the
 * caller so this stays pure. Any other name, or `false`, goes to localeCompare.
 */
export function compareNames(a: string, b: string, plainByCodeUnit: boolean): number {
  if (plainByCodeUnit && PLAIN_NAME.test(a) && PLAIN_NAME.test(b)) return a < b ? -1 : a > b ? 1 : 0;
  return a.localeCompare(b);
}

/**
 * Code-unit order, the same in every process whatever its locale. For orders that exist only to
 * make output deterministic (inventories, target lists): for the plain names Kubernetes objects
 * usually have it is also the order localeCompare gives under the root or an English locale (see
 * plainNamesCollateByCodeUnit), and for the untrusted names they may have it never depends on
 * where the process runs (a CronJob and the webhook may run under different locales).
 */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
