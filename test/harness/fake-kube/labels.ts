// Equality-based label selectors ("key", "key=value", comma-joined): what the product sends.
// Anything else is a 400 like the real apiserver's parse error, so a product change that starts
// sending set-based selectors fails loudly here instead of matching everything.
import { BadRequest } from './http.js';

type LabelRequirement = { kind: 'exists'; key: string } | { kind: 'equals'; key: string; value: string };

export type LabelSelector = LabelRequirement[];

export function parseLabelSelector(text: string | null): LabelSelector {
  if (text === null || text.trim() === '') return [];
  return text.split(',').map((rawTerm) => {
    const term = rawTerm.trim();
    let match: RegExpExecArray | null;
    if ((match = /^([\w./-]+)\s*==?\s*([\w.-]*)$/.exec(term))) {
      return { kind: 'equals', key: match[1] ?? '', value: match[2] ?? '' };
    }
    if ((match = /^([\w./-]+)$/.exec(term))) return { kind: 'exists', key: match[1] ?? '' };
    throw new BadRequest(`unable to parse requirement: ${JSON.stringify(term)}`);
  });
}

export function labelsMatch(labels: Record<string, string> | undefined, selector: LabelSelector): boolean {
  const actual = labels ?? {};
  return selector.every((requirement) =>
    requirement.kind === 'exists' ? actual[requirement.key] !== undefined : actual[requirement.key] === requirement.value,
  );
}
