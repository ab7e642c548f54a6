// The admission answer's JSON response, written without express's generic res.json/res.send.
import type { ServerResponse } from 'node:http';

/** Below this length express measures a string body; from it on, it sends a Buffer. */
const STRING_BODY_LIMIT = 1000;

/**
 * Sends exactly what `res.status(status).json(body)` sends for a POST in this app (express 4, no
 * ETag, no JSON escape, replacer or spaces): the same headers in the same order with the same
 * values, and the same bytes. express gets there through a mime lookup and a parse and re-format
 * of the content type on every response, a visible share of a cached allow's CPU.
 * webhook/server/send-json.test.ts compares the two on the wire.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  if (text.length < STRING_BODY_LIMIT) {
    res.setHeader('Content-Length', String(Buffer.byteLength(text, 'utf8')));
    res.end(text, 'utf8');
    return;
  }
  const chunk = Buffer.from(text, 'utf8');
  res.setHeader('Content-Length', String(chunk.length));
  res.end(chunk);
}
