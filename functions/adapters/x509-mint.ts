// The one X.509 certificate etcd-guard makes (an etcd client certificate signed by a CA, see
// capi-credentials.ts), written as DER by hand: a general X.509 library (@peculiar/x509 with
// pkijs, asn1js, tsyringe and reflect-metadata) spent far more CPU per certificate here and
// loaded a large module tree into every fleet process, for a structure that never varies.
//
// Strict on both sides: the writer emits DER only (minimal lengths and integers, RFC 5280 times
// without fractions), and the reader, which only takes the issuer's subject and key identifier
// from the CA certificate, refuses indefinite or non-minimal lengths and anything running past its
// parent. The issuer's subject is copied byte for byte: re-encoding a Name can change its string
// types or RDN order, and a chain whose issuer does not match the CA's subject bytes may not build.
import { sign, type KeyObject } from 'node:crypto';

const TAG = {
  boolean: 0x01,
  integer: 0x02,
  bitString: 0x03,
  octetString: 0x04,
  null: 0x05,
  oid: 0x06,
  utf8String: 0x0c,
  printableString: 0x13,
  utcTime: 0x17,
  generalizedTime: 0x18,
  sequence: 0x30,
  set: 0x31,
} as const;

/** The length octets of DER (X.690 §8.1.3, §10.1): short form below 128, else the minimal long form. */
export function derLength(length: number): Buffer {
  if (!Number.isSafeInteger(length) || length < 0) throw new RangeError('a DER length is a non-negative integer');
  if (length < 0x80) return Buffer.from([length]);
  const octets: number[] = [];
  for (let rest = length; rest > 0; rest = Math.floor(rest / 256)) octets.unshift(rest % 256);
  return Buffer.from([0x80 | octets.length, ...octets]);
}

export function derElement(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

const sequence = (...items: Buffer[]): Buffer => derElement(TAG.sequence, ...items);
const octetString = (content: Buffer): Buffer => derElement(TAG.octetString, content);
const derTrue = Buffer.from([TAG.boolean, 1, 0xff]);

/** A non-negative INTEGER from its big-endian magnitude: no redundant leading zeros, 0x00 before a set high bit. */
export function derUnsignedInteger(magnitude: Uint8Array): Buffer {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start += 1;
  const minimal = Buffer.from(magnitude.subarray(start));
  if (minimal.length === 0) return derElement(TAG.integer, Buffer.from([0]));
  const needsPad = ((minimal[0] ?? 0) & 0x80) !== 0;
  return derElement(TAG.integer, needsPad ? Buffer.concat([Buffer.from([0]), minimal]) : minimal);
}

/** An OBJECT IDENTIFIER from dotted form (X.690 §8.19). */
export function derObjectIdentifier(dotted: string): Buffer {
  const arcs = dotted.split('.').map((arc) => (/^\d+$/.test(arc) ? Number(arc) : Number.NaN));
  const [first, second, ...rest] = arcs;
  const valid =
    first !== undefined &&
    second !== undefined &&
    arcs.every((arc) => Number.isSafeInteger(arc)) &&
    first <= 2 &&
    (first === 2 || second < 40);
  if (!valid) throw new RangeError('not a dotted object identifier');
  const octets: number[] = [];
  for (const arc of [first * 40 + second, ...rest]) {
    const base128 = [arc % 128];
    for (let high = Math.floor(arc / 128); high > 0; high = Math.floor(high / 128)) base128.unshift(0x80 | (high % 128));
    octets.push(...base128);
  }
  return derElement(TAG.oid, Buffer.from(octets));
}

/** A BIT STRING of whole octets: signatures and public keys. */
function bitString(content: Buffer, unusedBits = 0): Buffer {
  return derElement(TAG.bitString, Buffer.from([unusedBits]), content);
}

/**
 * A certificate validity time (RFC 5280 §4.1.2.5): UTCTime YYMMDDHHMMSSZ through 2049,
 * GeneralizedTime YYYYMMDDHHMMSSZ from 2050, whole seconds (milliseconds are dropped).
 */
export function derTime(date: Date): Buffer {
  const year = date.getUTCFullYear();
  if (!Number.isFinite(date.getTime()) || year < 1950 || year > 9999) {
    throw new RangeError('a certificate time is between 1950 and 9999');
  }
  const digits = date.toISOString().slice(0, 19).replace(/[-T:]/g, '');
  return year < 2050
    ? derElement(TAG.utcTime, Buffer.from(`${digits.slice(2)}Z`, 'latin1'))
    : derElement(TAG.generalizedTime, Buffer.from(`${digits}Z`, 'latin1'));
}

const OID = {
  commonName: derObjectIdentifier('2.5.4.3'),
  subjectKeyIdentifier: derObjectIdentifier('2.5.29.14'),
  keyUsage: derObjectIdentifier('2.5.29.15'),
  basicConstraints: derObjectIdentifier('2.5.29.19'),
  authorityKeyIdentifier: derObjectIdentifier('2.5.29.35'),
  extendedKeyUsage: derObjectIdentifier('2.5.29.37'),
  clientAuth: derObjectIdentifier('1.3.6.1.5.5.7.3.2'),
};

/** A Name with a single RDN, the common name: PrintableString when its characters allow, else UTF8String. */
export function commonNameOnly(commonName: string): Buffer {
  const printable = /^[A-Za-z0-9 '()+,\-./:=?]+$/.test(commonName);
  const value = derElement(printable ? TAG.printableString : TAG.utf8String, Buffer.from(commonName, 'utf8'));
  return sequence(derElement(TAG.set, sequence(OID.commonName, value)));
}

/**
 * The extensions of an etcd client certificate, as KCP sets them: basic constraints CA:false and
 * key usage digitalSignature (both critical), extended key usage clientAuth, and the authority key
 * identifier when the CA names its own key.
 */
export function clientAuthExtensions(authorityKeyId: Buffer | undefined): Buffer[] {
  const extension = (oid: Buffer, critical: boolean, value: Buffer) =>
    sequence(oid, ...(critical ? [derTrue] : []), octetString(value));
  return [
    extension(OID.basicConstraints, true, sequence()),
    // digitalSignature is bit 0: one octet 0x80 with its 7 trailing zero bits unused (DER drops trailing zeros).
    extension(OID.keyUsage, true, bitString(Buffer.from([0x80]), 7)),
    extension(OID.extendedKeyUsage, false, sequence(OID.clientAuth)),
    ...(authorityKeyId !== undefined
      ? [extension(OID.authorityKeyIdentifier, false, sequence(derElement(0x80, authorityKeyId)))]
      : []),
  ];
}

export interface SignatureAlgorithm {
  /** "RSA", "ECDSA-P-256", ...: the key type a client key pair is made of to match the CA. */
  id: string;
  hash: 'sha256' | 'sha384' | 'sha512';
  /** AlgorithmIdentifier DER: sha256WithRSAEncryption (NULL parameters) or ecdsa-with-SHAn (none). */
  identifier: Buffer;
  /** The curve's Node name for ECDSA keys (prime256v1, secp384r1, secp521r1). */
  namedCurve?: string;
}

const SHA256_WITH_RSA = sequence(derObjectIdentifier('1.2.840.113549.1.1.11'), Buffer.from([TAG.null, 0]));

const ECDSA_CURVES: Record<string, { curve: string; hash: SignatureAlgorithm['hash']; oid: string }> = {
  prime256v1: { curve: 'P-256', hash: 'sha256', oid: '1.2.840.10045.4.3.2' },
  secp384r1: { curve: 'P-384', hash: 'sha384', oid: '1.2.840.10045.4.3.3' },
  secp521r1: { curve: 'P-521', hash: 'sha512', oid: '1.2.840.10045.4.3.4' },
};

/** The signature algorithm for a CA key: RSA PKCS #1 v1.5 or ECDSA on P-256/384/521; null for any other key. */
export function signatureAlgorithmFor(key: KeyObject): SignatureAlgorithm | null {
  if (key.asymmetricKeyType === 'rsa') return { id: 'RSA', hash: 'sha256', identifier: SHA256_WITH_RSA };
  const namedCurve = key.asymmetricKeyDetails?.namedCurve;
  const ec = key.asymmetricKeyType === 'ec' && namedCurve !== undefined ? ECDSA_CURVES[namedCurve] : undefined;
  if (ec === undefined || namedCurve === undefined) return null;
  return { id: `ECDSA-${ec.curve}`, hash: ec.hash, identifier: sequence(derObjectIdentifier(ec.oid)), namedCurve };
}

/** The key type for an error message: "rsa-pss", "ed25519", "ec (curve secp256k1)". */
export function describeKeyType(key: KeyObject): string {
  const namedCurve = key.asymmetricKeyDetails?.namedCurve;
  const type = key.asymmetricKeyType ?? 'unknown';
  return type === 'ec' && namedCurve !== undefined ? `ec (curve ${namedCurve})` : type;
}

export interface CertificateContent {
  /** Big-endian magnitude of the serial number: encoded as a positive INTEGER. */
  serial: Uint8Array;
  /** The issuer's Name DER, copied into the certificate as is. */
  issuer: Buffer;
  subject: Buffer;
  notBefore: Date;
  notAfter: Date;
  publicKey: KeyObject;
  extensions: Buffer[];
  /** The issuer's private key; its type picks the signature algorithm. */
  signingKey: KeyObject;
}

/** A signed v3 certificate, DER. Throws for a signing key signatureAlgorithmFor does not support. */
export function signCertificate(content: CertificateContent): Buffer {
  const algorithm = signatureAlgorithmFor(content.signingKey);
  if (algorithm === null) throw new Error(`cannot sign with a key of type ${describeKeyType(content.signingKey)}`);
  const tbs = sequence(
    derElement(0xa0, derUnsignedInteger(Buffer.from([2]))), // [0] EXPLICIT version: v3
    derUnsignedInteger(content.serial),
    algorithm.identifier,
    content.issuer,
    sequence(derTime(content.notBefore), derTime(content.notAfter)),
    content.subject,
    content.publicKey.export({ type: 'spki', format: 'der' }),
    ...(content.extensions.length > 0 ? [derElement(0xa3, sequence(...content.extensions))] : []),
  );
  const signature = sign(algorithm.hash, tbs, { key: content.signingKey, dsaEncoding: 'der' });
  return sequence(tbs, algorithm.identifier, bitString(signature));
}

export function certificatePem(der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
}

interface DerElement {
  tag: number;
  start: number;
  contentStart: number;
  end: number;
}

/** One element of `der` at `offset`, which must end by `limit`; DER only (definite, minimal lengths). */
export function readDerElement(der: Buffer, offset: number, limit: number): DerElement {
  const tag = der[offset];
  const first = der[offset + 1];
  if (tag === undefined || first === undefined || offset + 2 > limit) throw new Error('DER element truncated');
  if ((tag & 0x1f) === 0x1f) throw new Error('DER tag numbers above 30 do not occur in certificates');
  let length = first;
  let contentStart = offset + 2;
  if (first >= 0x80) {
    const count = first & 0x7f;
    if (count === 0) throw new Error('DER forbids indefinite lengths');
    if (count > 4 || contentStart + count > limit) throw new Error('DER length truncated or too long');
    length = 0;
    for (let index = 0; index < count; index += 1) length = length * 256 + (der[contentStart + index] ?? 0);
    if (length < 0x80 || der[contentStart] === 0) throw new Error('DER length not in its minimal form');
    contentStart += count;
  }
  const end = contentStart + length;
  if (end > limit) throw new Error('DER element runs past its parent');
  return { tag, start: offset, contentStart, end };
}

/** The elements inside a constructed element, which must fill it exactly. */
function childrenOf(der: Buffer, parent: DerElement): DerElement[] {
  const children: DerElement[] = [];
  for (let offset = parent.contentStart; offset < parent.end;) {
    const child = readDerElement(der, offset, parent.end);
    children.push(child);
    offset = child.end;
  }
  return children;
}

function expectTag(element: DerElement | undefined, tag: number, what: string): DerElement {
  if (element?.tag !== tag) throw new Error(`certificate ${what} missing or of the wrong type`);
  return element;
}

/** What a certificate signed by this CA copies from it: its subject (verbatim DER) and its subject key identifier. */
export function issuerOf(caCertificateDer: Buffer): { subject: Buffer; subjectKeyId: Buffer | undefined } {
  const certificate = readDerElement(caCertificateDer, 0, caCertificateDer.length);
  if (certificate.end !== caCertificateDer.length) throw new Error('certificate followed by trailing bytes');
  const tbs = expectTag(
    childrenOf(caCertificateDer, expectTag(certificate, TAG.sequence, 'itself'))[0],
    TAG.sequence,
    'tbsCertificate',
  );
  const fields = childrenOf(caCertificateDer, tbs);
  // version [0] is optional; then serial, signature, issuer, validity, subject, subjectPublicKeyInfo.
  const first = fields[0]?.tag === 0xa0 ? 1 : 0;
  const subject = expectTag(fields[first + 4], TAG.sequence, 'subject');
  const extensions = fields.slice(first + 6).find((field) => field.tag === 0xa3);
  return {
    subject: Buffer.from(caCertificateDer.subarray(subject.start, subject.end)),
    subjectKeyId: extensions === undefined ? undefined : subjectKeyIdIn(caCertificateDer, extensions),
  };
}

function subjectKeyIdIn(der: Buffer, extensionsField: DerElement): Buffer | undefined {
  const list = expectTag(childrenOf(der, extensionsField)[0], TAG.sequence, 'extensions');
  for (const extension of childrenOf(der, list)) {
    const [oid, ...rest] = childrenOf(der, expectTag(extension, TAG.sequence, 'extension'));
    if (oid === undefined || !der.subarray(oid.start, oid.end).equals(OID.subjectKeyIdentifier)) continue;
    const value = expectTag(rest.at(-1), TAG.octetString, 'subject key identifier');
    const keyId = expectTag(readDerElement(der, value.contentStart, value.end), TAG.octetString, 'subject key identifier');
    if (keyId.end !== value.end) throw new Error('certificate subject key identifier followed by trailing bytes');
    return Buffer.from(der.subarray(keyId.contentStart, keyId.end));
  }
  return undefined;
}
