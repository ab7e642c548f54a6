// The admission path past express: the apiserver's POST /validate, read and parsed here, with every
// other request (and every /validate that looks any different) left to the express app. express's
// router, its per-request prototype swap and body-parser's content-type, charset and decoder steps
// cost about as much CPU as the whole decision on a cached allow (issue 20's profile); what is left
// is reading the body, one JSON.parse, and the decision. It is the one fast path left on the
// admission path: without it a not guarded request falls below the 0.85× of the bare express
// server the bench targets (issue 31; the figures, from bench/admission-paths.ts, are in
// BENCHMARKS.md). webhook/server/fast-validate.test.ts sends the same requests both ways and compares the
// bytes on the wire.
import type http from 'node:http';
import { Readable } from 'node:stream';

/** What the apiserver sends on every call: `timeout=` and a Go duration, nothing to decode. */
export const APISERVER_QUERY = /^timeout=([0-9A-Za-z.]{1,64})$/;

/** The content types the apiserver sends; body-parser reads them as UTF-8, as this path does. */
const UTF8_JSON = /^application\/json(?:; ?charset=utf-8)?$/i;

const DECIMAL = /^[0-9]{1,9}$/;

export const VALIDATE_PATH = '/validate';
const VALIDATE_PATH_QUERY = '/validate?';

/** The answer for a POST /validate this path does not take: express does, exactly as before. */
export const NOT_FAST = Symbol('not the fast path');

/**
 * The ?timeout= of a request the fast path takes (undefined when there is none), or NOT_FAST.
 * Taken: POST to exactly /validate, no query or the apiserver's one, a Content-Length within the
 * limit, no Content-Encoding or Transfer-Encoding, and no Content-Type or JSON as UTF-8. Anything
 * else (a chunked or compressed body, another charset, a trailing slash, an odd query) is rare and
 * goes through body-parser and the router, whose answers for it are the contract.
 */
export function fastValidateQuery(req: http.IncomingMessage, limitBytes: number): string | undefined | typeof NOT_FAST {
  if (req.method !== 'POST') return NOT_FAST;
  const url = req.url ?? '';
  let timeout: string | undefined;
  if (url !== VALIDATE_PATH) {
    if (!url.startsWith(VALIDATE_PATH_QUERY)) return NOT_FAST;
    timeout = APISERVER_QUERY.exec(url.slice(VALIDATE_PATH_QUERY.length))?.[1];
    if (timeout === undefined) return NOT_FAST;
  }
  const { headers } = req;
  if (headers['transfer-encoding'] !== undefined || headers['content-encoding'] !== undefined) return NOT_FAST;
  const length = headers['content-length'];
  if (length === undefined || !DECIMAL.test(length) || Number(length) > limitBytes) return NOT_FAST;
  const type = headers['content-type'];
  if (type !== undefined && !UTF8_JSON.test(type)) return NOT_FAST;
  return timeout;
}

/** JSON whitespace (RFC 8259): what may come before the first value. */
function isJsonWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
}

/**
 * The body as body-parser's json({ strict: true }) gives it, or undefined when it would refuse it:
 * UTF-8 with a leading byte-order mark dropped (iconv-lite's decoder drops it), {} for an empty
 * body, and only an object or array at the top.
 */
export function parseStrictJson(raw: Buffer): unknown {
  let text = raw.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.length === 0) return {};
  let index = 0;
  while (index < text.length && isJsonWhitespace(text.charCodeAt(index))) index++;
  const first = text.charCodeAt(index);
  if (first !== 0x7b && first !== 0x5b) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

type BodyParser = (req: http.IncomingMessage, res: http.ServerResponse, next: (error?: unknown) => void) => void;

/**
 * Why body-parser refuses this body, in its own words: it reads the same bytes with the same
 * headers. Only for a body that does not parse, so only bad input pays for the second reading.
 */
export function bodyParserError(jsonBody: BodyParser, raw: Buffer, contentType: string | undefined): Promise<unknown> {
  const replay = Readable.from([raw], { objectMode: false }) as Readable & { headers: http.IncomingHttpHeaders };
  replay.headers = {
    'content-length': String(raw.length),
    ...(contentType === undefined ? {} : { 'content-type': contentType }),
  };
  return new Promise((resolve) => {
    jsonBody(replay as unknown as http.IncomingMessage, {} as http.ServerResponse, (error?: unknown) =>
      resolve(error ?? new Error('the body does not parse as a JSON object')),
    );
  });
}

function requestAborted(): Error {
  return Object.assign(new Error('request aborted'), { status: 400, type: 'request.aborted' });
}

export interface FastValidateParts {
  /** Every request the fast path does not take. */
  readonly fallback: http.RequestListener;
  /** The app's own JSON body parser: names what is wrong with a body that does not parse. */
  readonly jsonBody: BodyParser;
  readonly limitBytes: number;
  /** Decides and answers; never rejects for a request it has a uid for. */
  validate(body: unknown, timeout: string | undefined, res: http.ServerResponse): Promise<void>;
  /** Answers an error as the app's error handler does. */
  fail(error: unknown, res: http.ServerResponse): void;
}

/** The request listener: POST /validate as the apiserver sends it here, the rest to `fallback`. */
export function withFastValidate(parts: FastValidateParts): http.RequestListener {
  const { fallback, jsonBody, limitBytes } = parts;
  const judge = (req: http.IncomingMessage, res: http.ServerResponse, timeout: string | undefined, raw: Buffer): void => {
    const body = parseStrictJson(raw);
    const decided =
      body === undefined
        ? bodyParserError(jsonBody, raw, req.headers['content-type']).then((error) => parts.fail(error, res))
        : parts.validate(body, timeout, res);
    decided.catch((error: unknown) => parts.fail(error, res));
  };
  return (req, res) => {
    const timeout = fastValidateQuery(req, limitBytes);
    if (timeout === NOT_FAST) {
      fallback(req, res);
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => judge(req, res, timeout, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    // A client that goes away mid-body: body-parser answers it 400 "request aborted", to nobody.
    req.on('error', () => parts.fail(requestAborted(), res));
  };
}
