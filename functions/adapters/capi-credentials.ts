// Credentials for a Cluster API workload cluster's etcd, got the way KCP gets them: the workload
// kubeconfig from Secret `<cluster>-kubeconfig` (key `value`) and the etcd CA certificate and key
// from Secret `<cluster>-etcd` (keys `tls.crt`, `tls.key`), both in the Cluster's namespace on the
// management cluster; a client certificate is then minted in memory and signed by that CA.
//
// Like KCP's (CN cluster-api.x-k8s.io; ours CN etcd-guard): key usage digitalSignature, extended
// key usage clientAuth, NotBefore backdated 5 minutes for clock skew, client key of the CA's type. Unlike KCP (10-year
// certificates cached a day) ours live 1 hour and are reused until 15 minutes before expiry, per
// cluster and CA fingerprint, so a rotated CA mints anew at once.
//
// X.509 is @peculiar/x509 on Node's WebCrypto: maintained, typed, does RSA and ECDSA (node-forge
// does no ECDSA; pkijs is the lower layer it builds on). It needs the reflect-metadata polyfill.
//
// The CA key and the minted key live in memory only: never written, logged, or put in an error.
import 'reflect-metadata';
import { createHash, createPrivateKey, createPublicKey, KeyObject, randomBytes, webcrypto, X509Certificate } from 'node:crypto';
import {
  AuthorityKeyIdentifierExtension,
  BasicConstraintsExtension,
  cryptoProvider,
  ExtendedKeyUsage,
  ExtendedKeyUsageExtension,
  KeyUsageFlags,
  KeyUsagesExtension,
  SubjectKeyIdentifierExtension,
  X509Certificate as IssuerCertificate,
  X509CertificateGenerator,
} from '@peculiar/x509';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Deadline } from '../domain/deadline.js';
import { EtcdAccessError } from '../usecases/etcd-access.js';
import type { ProbeCredentials } from './etcd-member-probe.js';
import { callKube } from './kube.js';
import { boundedSecretValue, parseWorkloadKubeconfig, type WorkloadEndpoint } from './workload-kubeconfig.js';

cryptoProvider.set(webcrypto as unknown as Parameters<typeof cryptoProvider.set>[0]);

const CERTIFICATE_LIFETIME_MS = 60 * 60 * 1000;
const RENEW_BEFORE_EXPIRY_MS = 15 * 60 * 1000;
const BACKDATE_MS = 5 * 60 * 1000;
const CLIENT_COMMON_NAME = 'etcd-guard';

export interface CapiCluster {
  namespace: string;
  clusterName: string;
}

/** The etcd CA as read from `<cluster>-etcd`; `key` never leaves this module. */
interface EtcdCa {
  certPem: Buffer;
  cert: X509Certificate;
  key: KeyObject;
  /** SHA-256 of the CA certificate's DER: a rotated CA is another cache entry. */
  fingerprint: string;
  algorithm: SigningAlgorithm;
}

interface SigningAlgorithm {
  /** Cache key of the client key pair type: "RSA-2048", "ECDSA-P-256", ... */
  id: string;
  sign: webcrypto.RsaHashedImportParams | webcrypto.EcKeyImportParams;
  generate: webcrypto.RsaHashedKeyGenParams | webcrypto.EcKeyGenParams;
  signature: { name: string; hash: string };
}

const RSA_SHA256: SigningAlgorithm = {
  id: 'RSA-2048',
  sign: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
  generate: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]) },
  signature: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
};

const EC_CURVES: Record<string, { curve: string; hash: string }> = {
  prime256v1: { curve: 'P-256', hash: 'SHA-256' },
  secp384r1: { curve: 'P-384', hash: 'SHA-384' },
  secp521r1: { curve: 'P-521', hash: 'SHA-512' },
};

function secretName(cluster: CapiCluster, suffix: string): string {
  return `${cluster.namespace}/${cluster.clusterName}-${suffix}`;
}

/** The algorithm that signs with the CA key and makes client keys of the same type; null if unsupported. */
function algorithmFor(key: KeyObject): SigningAlgorithm | null {
  if (key.asymmetricKeyType === 'rsa') return RSA_SHA256;
  const namedCurve = key.asymmetricKeyDetails?.namedCurve;
  const ec = key.asymmetricKeyType === 'ec' && namedCurve !== undefined ? EC_CURVES[namedCurve] : undefined;
  if (ec === undefined) return null;
  return {
    id: `ECDSA-${ec.curve}`,
    sign: { name: 'ECDSA', namedCurve: ec.curve },
    generate: { name: 'ECDSA', namedCurve: ec.curve },
    signature: { name: 'ECDSA', hash: ec.hash },
  };
}

/** Parses `<cluster>-etcd`; every failure names the Secret and key, never their content. */
export function parseEtcdCa(data: Record<string, string> | undefined, secret: string): EtcdCa {
  const certPem = boundedSecretValue(data, 'tls.crt', secret);
  const keyPem = boundedSecretValue(data, 'tls.key', secret);
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch {
    throw new EtcdAccessError(`Secret ${secret}: "tls.crt" is not a PEM certificate`);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch {
    throw new EtcdAccessError(`Secret ${secret}: "tls.key" is not an unencrypted PEM private key`);
  }
  if (!cert.ca) throw new EtcdAccessError(`Secret ${secret}: "tls.crt" is not a CA certificate`);
  const publicDer = (publicKey: KeyObject) => publicKey.export({ type: 'spki', format: 'der' });
  if (!publicDer(createPublicKey(key)).equals(publicDer(cert.publicKey))) {
    throw new EtcdAccessError(`Secret ${secret}: "tls.key" does not belong to the certificate in "tls.crt"`);
  }
  const algorithm = algorithmFor(key);
  if (algorithm === null) {
    throw new EtcdAccessError(
      `Secret ${secret}: CA key type ${key.asymmetricKeyType ?? 'unknown'} is not supported (RSA or ECDSA)`,
    );
  }
  const fingerprint = createHash('sha256').update(cert.raw).digest('hex');
  return { certPem, cert, key, fingerprint, algorithm };
}

interface ClientKeyPair {
  keys: webcrypto.CryptoKeyPair;
  pem: Buffer;
  createdAt: number;
}

interface MintedCertificate {
  fingerprint: string;
  cert: Buffer;
  key: Buffer;
  notAfter: number;
}

/**
 * Mints and keeps client certificates. One client key pair per key type, renewed with the
 * certificate lifetime, is shared by every cluster's certificate: KCP caches its client key too,
 * because RSA-2048 generation costs 50–150 ms, which a fleet of 100 clusters would pay per run.
 */
export class ClientCertificateMinter {
  private readonly keyPairs = new Map<string, Promise<ClientKeyPair>>();
  private readonly minted = new Map<string, Promise<MintedCertificate>>();

  constructor(private readonly now: () => number = Date.now) {}

  /** A certificate for `cluster` signed by `ca`: the cached one until near expiry, else a new one. */
  async certificateFor(cluster: CapiCluster, ca: EtcdCa): Promise<{ cert: Buffer; key: Buffer }> {
    const cacheKey = `${cluster.namespace}/${cluster.clusterName}`;
    const cached = await this.minted.get(cacheKey)?.catch(() => undefined);
    if (cached !== undefined && cached.fingerprint === ca.fingerprint && this.now() < cached.notAfter - RENEW_BEFORE_EXPIRY_MS) {
      return cached;
    }
    const minting = this.mint(ca);
    this.minted.set(cacheKey, minting);
    try {
      return await minting;
    } catch {
      this.minted.delete(cacheKey);
      throw new EtcdAccessError(`cannot sign an etcd client certificate with the CA in Secret ${secretName(cluster, 'etcd')}`);
    }
  }

  private keyPair(algorithm: SigningAlgorithm): Promise<ClientKeyPair> {
    const existing = this.keyPairs.get(algorithm.id);
    const fresh = async (): Promise<ClientKeyPair> => {
      const keys = (await webcrypto.subtle.generateKey(algorithm.generate, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
      const pem = KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' });
      return { keys, pem: Buffer.from(pem), createdAt: this.now() };
    };
    const renewed = (existing ?? fresh()).then((pair) =>
      this.now() - pair.createdAt < CERTIFICATE_LIFETIME_MS - RENEW_BEFORE_EXPIRY_MS ? pair : fresh(),
    );
    this.keyPairs.set(algorithm.id, renewed);
    renewed.catch(() => this.keyPairs.delete(algorithm.id));
    return renewed;
  }

  private async mint(ca: EtcdCa): Promise<MintedCertificate> {
    const pair = await this.keyPair(ca.algorithm);
    const signingKey = await webcrypto.subtle.importKey(
      'pkcs8',
      ca.key.export({ type: 'pkcs8', format: 'der' }),
      ca.algorithm.sign,
      false,
      ['sign'],
    );
    const issuer = new IssuerCertificate(ca.cert.raw);
    const now = this.now();
    const notAfter = now + CERTIFICATE_LIFETIME_MS;
    const serial = randomBytes(16);
    serial[0] = (serial[0] ?? 0) & 0x7f; // a positive INTEGER
    const issuerKeyId = issuer.getExtension(SubjectKeyIdentifierExtension)?.keyId;
    const certificate = await X509CertificateGenerator.create({
      serialNumber: serial.toString('hex'),
      subject: `CN=${CLIENT_COMMON_NAME}`,
      issuer: issuer.subjectName,
      notBefore: new Date(now - BACKDATE_MS),
      notAfter: new Date(notAfter),
      publicKey: pair.keys.publicKey,
      signingKey,
      signingAlgorithm: ca.algorithm.signature,
      extensions: [
        new BasicConstraintsExtension(false, undefined, true),
        new KeyUsagesExtension(KeyUsageFlags.digitalSignature, true),
        new ExtendedKeyUsageExtension([ExtendedKeyUsage.clientAuth]),
        ...(issuerKeyId !== undefined ? [new AuthorityKeyIdentifierExtension(issuerKeyId)] : []),
      ],
    });
    return { fingerprint: ca.fingerprint, cert: Buffer.from(certificate.toString('pem')), key: pair.pem, notAfter };
  }
}

/** A Secret's data, or an EtcdAccessError naming the Secret and why it could not be read. */
async function readSecretData(api: CoreV1Api, namespace: string, name: string, deadline: Deadline) {
  try {
    const secret = await callKube({ verb: 'get', resource: 'secrets', name, namespace }, deadline, (options) =>
      api.readNamespacedSecret({ name, namespace }, options),
    );
    return secret.data;
  } catch (error) {
    // callKube's errors name the verb, Secret and namespace and carry the API server's Status message only.
    throw new EtcdAccessError((error as Error).message);
  }
}

export interface CapiCredentials {
  /** How to talk to the workload cluster's API server (pod port-forward): static credentials only. */
  workload: WorkloadEndpoint;
  /** The etcd CA and a minted client certificate, in memory. */
  etcd: Required<ProbeCredentials>;
}

/** Reads both Secrets (in parallel, before `deadline`) and returns the workload kubeconfig and etcd client credentials. */
export async function readCapiCredentials(
  api: CoreV1Api,
  cluster: CapiCluster,
  deadline: Deadline,
  minter: ClientCertificateMinter,
): Promise<CapiCredentials> {
  const kubeconfigSecret = `${cluster.clusterName}-kubeconfig`;
  const etcdSecret = `${cluster.clusterName}-etcd`;
  const [kubeconfigData, etcdData] = await Promise.all([
    readSecretData(api, cluster.namespace, kubeconfigSecret, deadline),
    readSecretData(api, cluster.namespace, etcdSecret, deadline),
  ]);
  const workload = parseWorkloadKubeconfig(kubeconfigData, secretName(cluster, 'kubeconfig'));
  const ca = parseEtcdCa(etcdData, secretName(cluster, 'etcd'));
  const client = await minter.certificateFor(cluster, ca);
  return { workload, etcd: { ca: ca.certPem, cert: client.cert, key: client.key } };
}
