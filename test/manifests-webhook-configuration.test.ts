// The ValidatingWebhookConfiguration: fail closed, call /validate, guard every resource the
// webhook's rules know together with its /scale twin, never its own namespace.
import { describe, expect, it } from 'vitest';
import { GUARD_RULES } from '../webhook/domain/rules.js';
import { at, guardNamespace, name, objs, service, strings, webhookConfiguration } from './harness/manifests.js';

describe('ValidatingWebhookConfiguration', () => {
  const webhooks = objs(at(webhookConfiguration, 'webhooks'));

  it('has at least one webhook, each failing closed within 10 s with no side effects', () => {
    expect(webhooks.length).toBeGreaterThan(0);
    for (const webhook of webhooks) {
      expect(webhook.failurePolicy).toBe('Fail');
      expect(webhook.timeoutSeconds).toBe(10);
      expect(webhook.sideEffects).toBe('None');
      expect(webhook.admissionReviewVersions).toEqual(['v1']);
      expect(webhook.matchPolicy).toBe('Equivalent');
    }
  });

  it('calls /validate on the webhook Service port', () => {
    const servicePort = objs(at(service, 'spec', 'ports'))[0];
    for (const webhook of webhooks) {
      expect(at(webhook, 'clientConfig', 'service')).toEqual({
        name: name(service),
        namespace: guardNamespace,
        path: '/validate',
        port: at(servicePort, 'port'),
      });
    }
  });

  it.each(GUARD_RULES.map((rule) => [`${rule.group}/${rule.resource}`, rule] as const))(
    'guards %s and its /scale subresource on UPDATE in the same webhook, for every version the rule knows',
    (_label, guardRule) => {
      const covering = webhooks.filter((webhook) =>
        objs(webhook.rules).some(
          (rule) => strings(rule.apiGroups).includes(guardRule.group) && strings(rule.resources).includes(guardRule.resource),
        ),
      );
      expect(covering.length, `a webhook rule for ${guardRule.group}/${guardRule.resource}`).toBeGreaterThan(0);
      for (const webhook of covering) {
        for (const resource of [guardRule.resource, `${guardRule.resource}/scale`]) {
          const rule = objs(webhook.rules).find(
            (candidate) =>
              strings(candidate.apiGroups).includes(guardRule.group) && strings(candidate.resources).includes(resource),
          );
          expect(rule, `${resource} in webhook ${String(webhook.name)}`).toBeDefined();
          expect(strings(at(rule, 'operations'))).toContain('UPDATE');
          for (const version of guardRule.versions) expect(strings(at(rule, 'apiVersions'))).toContain(version);
        }
      }
    },
  );

  it('every guarded resource rule has its /scale twin with the same apiGroup and UPDATE', () => {
    for (const webhook of webhooks) {
      const rules = objs(webhook.rules);
      for (const rule of rules) {
        expect(strings(rule.operations), `operations of ${JSON.stringify(rule.resources)}`).toEqual(['UPDATE']);
        for (const resource of strings(rule.resources).filter((entry) => !entry.includes('/'))) {
          const twin = rules.find(
            (candidate) =>
              strings(candidate.resources).includes(`${resource}/scale`) &&
              JSON.stringify(strings(candidate.apiGroups)) === JSON.stringify(strings(rule.apiGroups)) &&
              strings(candidate.operations).includes('UPDATE'),
          );
          expect(twin, `${resource}/scale next to ${resource}`).toBeDefined();
        }
      }
    }
  });

  it('has no objectSelector where /scale requests are matched (a Scale carries no labels)', () => {
    for (const webhook of webhooks) {
      const matchesScale = objs(webhook.rules).some((rule) =>
        strings(rule.resources).some((resource) => resource.endsWith('/scale')),
      );
      if (matchesScale) expect(webhook.objectSelector, String(webhook.name)).toBeUndefined();
    }
  });

  it('never guards its own namespace', () => {
    for (const webhook of webhooks) {
      const expressions = objs(at(webhook, 'namespaceSelector', 'matchExpressions'));
      const exclusion = expressions.find(
        (expression) => expression.key === 'kubernetes.io/metadata.name' && expression.operator === 'NotIn',
      );
      expect(strings(at(exclusion, 'values'))).toContain(guardNamespace);
    }
  });
});
