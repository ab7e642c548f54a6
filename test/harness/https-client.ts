// One HTTPS request to a test server (the webhook), bounded by a socket-idle timeout, answering
// status, headers, body text and the body as JSON when it is JSON.
import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';

export interface HttpsAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** The body parsed as JSON; null when it is not JSON. */
  json: unknown;
}

export interface HttpsRequestOptions {
  method: string;
  agent: https.Agent;
  /** The CA that signed the server's certificate. */
  ca: Buffer;
  body?: string | Buffer;
  /** Added to `content-type: application/json`, which they may override. */
  headers?: Record<string, string>;
  timeoutMs: number;
}

export function httpsRequest(url: string, options: HttpsRequestOptions): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method: options.method,
        agent: options.agent,
        ca: options.ca,
        headers: { 'content-type': 'application/json', ...options.headers },
        timeout: options.timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown = null;
          try {
            json = JSON.parse(text);
          } catch {
            json = null;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${options.method} ${url} timed out after ${options.timeoutMs} ms`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

/** One plain-HTTP request (the webhook's metrics port), bounded like httpsRequest. */
export function httpRequest(url: string, options: { method?: string; timeoutMs?: number } = {}): Promise<HttpsAnswer> {
  const method = options.method ?? 'GET';
  const timeoutMs = options.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, timeout: timeoutMs, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), json: null }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url} timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}
