// Credentials for a Cluster API workload cluster's etcd, got the way KCP gets them: the workload
// kubeconfig from Secret `<cluster>-kubeconfig` (key `value`) and the etcd CA certificate and key
// from Secret `<cluster>-etcd` (keys `tls.crt`, `tls.key`), both in the Cluster's namespace on the
// management cluster; a client certificate is then minted in memory and signed by that CA.
//
// Like KCP's (CN cluster-api.x-k8s.io; ours CN etcd-guard): key usage digitalSignature, extended
// key usage clientAuth, NotBefore backdated 5 minutes for clock skew, client key of the CA's type.
// Ours also carries basic constraints CA:false and, when the CA names its key, the authority key
// identifier. Unlike KCP (10-year certificates cached a day) ours live 1 hour and are reused until
// 15 minutes before expiry, per cluster and CA fingerprint, so a rotated CA mints anew at once.
//
// X.509 is our own DER writer (x509-mint.ts) and node:crypto's `sign`: the certificate never
// varies, and @peculiar/x509 (with pkijs, asn1js, tsyringe, reflect-metadata) cost many times
// the CPU per certificate, warm and cold (figures: BENCHMARKS.md). Signing is RSA PKCS #1 v1.5
// with SHA-256, or ECDSA on P-256/P-384/P-521 with SHA-256/384/512, following the CA key; other
// CA key types are refused when the Secret is read.
//
// The CA key and the minted key live in memory only: never written, logged, or put in an error.
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  KeyObject,
  randomBytes,
  X509Certificate,
} from 'node:crypto';
import { promisify } from 'node:util';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Deadline } from '../domain/deadline.js';
import { EtcdAccessError } from '../ports/etcd-access.js';
import { NotEvaluatedError } from '../shared/errors.js';
import type { ProbeCredentials } from '../ports/etcd-access.js';
import { callKube, isApiServerOutage } from './kube.js';
import { boundedSecretValue, parseWorkloadKubeconfig, type WorkloadEndpoint } from './workload-kubeconfig.js';
import {
  certificatePem,
  clientAuthExtensions,
  commonNameOnly,
  describeKeyType,
  issuerOf,
  signatureAlgorithmFor,
  signCertificate,
  type SignatureAlgorithm,
} from './x509-mint.js';

const generateKeyPairAsync = promisify(generateKeyPair);

const CERTIFICATE_LIFETIME_MS = 60 * 60 * 1000;
const RENEW_BEFORE_EXPIRY_MS = 15 * 60 * 1000;
const BACKDATE_MS = 5 * 60 * 1000;
const CLIENT_COMMON_NAME = 'etcd-guard';
const CLIENT_SUBJECT = commonNameOnly(CLIENT_COMMON_NAME);
const RSA_CLIENT_KEY_BITS = 2048;

export interface CapiCluster {
  namespace: string;
  clusterName: string;
}

/** What is learnt from checking a `<cluster>-etcd` Secret's CA: nothing of its key. */
interface CheckedCa {
  certPem: Buffer;
  cert: X509Certificate;
  /** SHA-256 of the CA certificate's DER: a rotated CA is another cache entry. */
  fingerprint: string;
  algorithm: SignatureAlgorithm;
}

/** The etcd CA as read from `<cluster>-etcd` this time; `keyPem` never leaves this module. */
interface EtcdCa extends CheckedCa {
  /** The Secret's key bytes of this read: turned into a key only to mint. */
  keyPem: Buffer;
}

/**
 * CAs checked before, by digest of the Secret's `tls.crt` and `tls.key` values exactly as read:
 * the fleet re-reads the Secret every evaluation, and parsing the certificate and the key and
 * comparing their public keys each time was a share of its CPU (figures: BENCHMARKS.md).
 * Only what the check found is kept, never the key (it is parsed again when a certificate is
 * minted: once per cluster per 45 minutes). Other bytes never find an entry. Bounded, least
 * recently used out first.
 */
const CHECKED_CAS = new Map<string, CheckedCa>();
const CHECKED_CAS_KEPT = 1024;

function secretName(cluster: CapiCluster, suffix: string): string {
  return `${cluster.namespace}/${cluster.clusterName}-${suffix}`;
}

/** Parses `<cluster>-etcd`; every failure names the Secret and key, never their content. */
export function parseEtcdCa(data: Record<string, string> | undefined, secret: string): EtcdCa {
  const certPem = boundedSecretValue(data, 'tls.crt', secret);
  const keyPem = boundedSecretValue(data, 'tls.key', secret);
  const digest = createHash('sha256');
  for (const part of [certPem, keyPem]) digest.update(`${part.length}:`).update(part);
  const cacheKey = digest.digest('hex');
  const kept = CHECKED_CAS.get(cacheKey);
  if (kept !== undefined) {
    CHECKED_CAS.delete(cacheKey);
    CHECKED_CAS.set(cacheKey, kept);
    return { ...kept, keyPem };
  }
  const checked = checkEtcdCa(certPem, keyPem, secret);
  if (CHECKED_CAS.size >= CHECKED_CAS_KEPT) CHECKED_CAS.delete(CHECKED_CAS.keys().next().value ?? '');
  CHECKED_CAS.set(cacheKey, checked);
  return { ...checked, keyPem };
}

function checkEtcdCa(certPem: Buffer, keyPem: Buffer, secret: string): CheckedCa {
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
  const algorithm = signatureAlgorithmFor(key);
  if (algorithm === null) {
    throw new EtcdAccessError(
      `Secret ${secret}: CA key type ${describeKeyType(key)} is not supported (RSA, or ECDSA on P-256, P-384 or P-521)`,
    );
  }
  const fingerprint = createHash('sha256').update(cert.raw).digest('hex');
  return { certPem, cert, fingerprint, algorithm };
}

interface ClientKeyPair {
  publicKey: KeyObject;
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
 * because generating an RSA-2048 key is slow, and a fleet would pay it per cluster and run
 * (figures: BENCHMARKS.md).
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

  private keyPair(algorithm: SignatureAlgorithm): Promise<ClientKeyPair> {
    const existing = this.keyPairs.get(algorithm.id);
    const fresh = async (): Promise<ClientKeyPair> => {
      const { publicKey, privateKey } =
        algorithm.namedCurve === undefined
          ? await generateKeyPairAsync('rsa', { modulusLength: RSA_CLIENT_KEY_BITS })
          : await generateKeyPairAsync('ec', { namedCurve: algorithm.namedCurve });
      const pem = privateKey.export({ type: 'pkcs8', format: 'pem' });
      return { publicKey, pem: Buffer.from(pem), createdAt: this.now() };
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
    const issuer = issuerOf(ca.cert.raw);
    const now = this.now();
    const notAfter = now + CERTIFICATE_LIFETIME_MS;
    const serial = randomBytes(16);
    serial[0] = (serial[0] ?? 0) & 0x7f; // 127 random bits: positive whatever the encoder does with the high bit
    const certificate = signCertificate({
      serial,
      issuer: issuer.subject,
      subject: CLIENT_SUBJECT,
      notBefore: new Date(now - BACKDATE_MS),
      notAfter: new Date(notAfter),
      publicKey: pair.publicKey,
      extensions: clientAuthExtensions(issuer.subjectKeyId),
      // Checked to parse and to belong to the certificate when the Secret was read (parseEtcdCa).
      signingKey: createPrivateKey(ca.keyPem),
    });
    return { fingerprint: ca.fingerprint, cert: Buffer.from(certificatePem(certificate)), key: pair.pem, notAfter };
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
    const message = (error as Error).message;
    // The management API not answering is ours to fix, not the cluster's verdict.
    if (isApiServerOutage(error)) throw new NotEvaluatedError(`the management API server: ${message}`);
    throw new EtcdAccessError(message);
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
