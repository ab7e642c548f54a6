// The EtcdAccess of an etcd-druid Etcd: the members' client URLs as druid advertises them, with
// the CA (and client certificate) read from the Secrets the Etcd's spec.etcd.clientUrlTls names.
// The PEM bytes stay in memory; errors name the Secret and key, never their content.
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Deadline } from '../domain/deadline.js';
import { probeCredentialsProblem } from './etcd-tls-identity.js';
import { type ProbeCredentials } from '../ports/etcd-access.js';
import { boundedSecretValue } from './workload-kubeconfig.js';
import { directEtcdAccess, EtcdAccessError, type EtcdAccess } from '../ports/etcd-access.js';
import { NotEvaluatedError } from '../shared/errors.js';
import type { DruidTlsSecrets } from '../domain/targets.js';
import { callKube, isApiServerOutage } from './kube.js';

/** A Secret's data (base64 values), or an EtcdAccessError naming the Secret and what failed. */
export async function readSecretData(
  api: CoreV1Api,
  namespace: string,
  name: string,
  deadline: Deadline,
): Promise<Record<string, string>> {
  try {
    const secret = await callKube({ verb: 'get', resource: 'secrets', name, namespace }, deadline, (options) =>
      api.readNamespacedSecret({ name, namespace }, options),
    );
    return secret.data ?? {};
  } catch (error) {
    // callKube's messages name the verb, Secret and namespace and carry only the apiserver's Status message.
    const message = (error as Error).message;
    // The management API not answering is ours to fix, not the cluster's verdict.
    if (isApiServerOutage(error)) throw new NotEvaluatedError(`the management API server: ${message}`);
    throw new EtcdAccessError(message);
  }
}

/** One key of a Secret's data, decoded; an EtcdAccessError when absent or not PEM. */
export function pemFromSecret(data: Record<string, string>, key: string, secret: string): Buffer {
  if (data[key] === undefined || data[key] === '')
    throw new EtcdAccessError(`Secret ${secret} has no key ${JSON.stringify(key)}`);
  const pem = boundedSecretValue(data, key, secret);
  if (!pem.toString('latin1').includes('-----BEGIN ')) {
    throw new EtcdAccessError(`Secret ${secret}: key ${JSON.stringify(key)} does not hold PEM data`);
  }
  return pem;
}

/** Reads the druid Etcd's TLS Secrets (in parallel, before `deadline`). */
export async function readDruidCredentials(
  api: CoreV1Api,
  namespace: string,
  tls: DruidTlsSecrets,
  deadline: Deadline,
): Promise<ProbeCredentials> {
  const [caData, clientData] = await Promise.all([
    readSecretData(api, namespace, tls.caSecret, deadline),
    tls.clientSecret === undefined ? undefined : readSecretData(api, namespace, tls.clientSecret, deadline),
  ]);
  const credentials: ProbeCredentials = { ca: pemFromSecret(caData, tls.caDataKey, `${namespace}/${tls.caSecret}`) };
  if (clientData !== undefined && tls.clientSecret !== undefined) {
    const secret = `${namespace}/${tls.clientSecret}`;
    credentials.cert = pemFromSecret(clientData, 'tls.crt', secret);
    credentials.key = pemFromSecret(clientData, 'tls.key', secret);
  }
  // Checked here, where the Secrets can be named: a key that is not its certificate's would
  // otherwise make the etcd client's constructor throw for every member.
  const problem = probeCredentialsProblem(credentials);
  if (problem !== null) {
    const names = [tls.caSecret, tls.clientSecret].filter((name) => name !== undefined).map((name) => `${namespace}/${name}`);
    throw new EtcdAccessError(`Secret ${names.join(' / ')}: ${problem}`);
  }
  return credentials;
}

export async function openDruidEtcdAccess(
  api: CoreV1Api,
  target: { endpoints: readonly string[]; reach: { namespace: string; tls: DruidTlsSecrets | null } },
  deadline: Deadline,
): Promise<EtcdAccess> {
  const credentials =
    target.reach.tls === null ? {} : await readDruidCredentials(api, target.reach.namespace, target.reach.tls, deadline);
  return directEtcdAccess(target.endpoints, credentials);
}
