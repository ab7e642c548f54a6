// A SPDY/3.1 framer: only what Kubernetes port-forward (`portforward.k8s.io`) uses. SPDY is
// frozen (its last spec draft is from 2013) and the npm SPDY libraries are unmaintained since
// 2018-2020, so this small framer replaces a dependency. Frames (draft 3.1, section 2.2):
//   control: 1 bit 1 | 15 bits version (3) | 16 bits type | 8 bits flags | 24 bits length | data
//   data:    1 bit 0 | 31 bits stream ID  | 8 bits flags | 24 bits length | data
// Header blocks are zlib-compressed with one context per direction for the whole connection,
// primed with the SPDY/3 dictionary (section 2.6.10.1).
import zlib from 'node:zlib';

export const SPDY_VERSION = 3;
export const FrameType = {
  SYN_STREAM: 1,
  SYN_REPLY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  HEADERS: 8,
  WINDOW_UPDATE: 9,
} as const;
export const FLAG_FIN = 0x01;
/** RST_STREAM status codes used here (section 2.6.3). */
export const RstStatus = { PROTOCOL_ERROR: 1, CANCEL: 5 } as const;
/** SPDY/3's initial per-stream flow-control window (section 2.6.8). */
export const INITIAL_WINDOW_BYTES = 64 * 1024;
const HEADER_BYTES = 8;

// The SPDY/3 header dictionary: these names, each with a 32-bit big-endian length, then the tail.
const DICTIONARY_WORDS = (
  'options head post put delete trace accept accept-charset accept-encoding accept-language accept-ranges age allow ' +
  'authorization cache-control connection content-base content-encoding content-language content-length ' +
  'content-location content-md5 content-range content-type date etag expect expires from host if-match ' +
  'if-modified-since if-none-match if-range if-unmodified-since last-modified location max-forwards pragma ' +
  'proxy-authenticate proxy-authorization range referer retry-after server te trailer transfer-encoding upgrade ' +
  'user-agent vary via warning www-authenticate method get status 200_OK version HTTP/1.1 url public set-cookie ' +
  'keep-alive origin'
)
  .split(' ')
  .map((word) => word.replace('_', ' '));
const DICTIONARY_TAIL =
  '100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505' +
  '203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized' +
  '403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable' +
  'Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT' +
  'chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,' +
  'text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.';
export const SPDY3_DICTIONARY = Buffer.concat([
  ...DICTIONARY_WORDS.map((word) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(word.length);
    return Buffer.concat([length, Buffer.from(word, 'latin1')]);
  }),
  Buffer.from(DICTIONARY_TAIL, 'latin1'),
]);

export type SpdyFrame =
  | { control: true; type: number; flags: number; data: Buffer }
  | { control: false; streamId: number; flags: number; data: Buffer };

export function controlFrame(type: number, flags: number, data: Buffer): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt16BE(0x8000 | SPDY_VERSION, 0);
  header.writeUInt16BE(type, 2);
  header.writeUInt32BE(data.length, 4);
  header[4] = flags;
  return Buffer.concat([header, data]);
}

export function dataFrame(streamId: number, flags: number, data: Buffer): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt32BE(streamId & 0x7fffffff, 0);
  header.writeUInt32BE(data.length, 4);
  header[4] = flags;
  return Buffer.concat([header, data]);
}

function uint32s(...values: number[]): Buffer {
  const buffer = Buffer.alloc(values.length * 4);
  values.forEach((value, index) => buffer.writeUInt32BE(value >>> 0, index * 4));
  return buffer;
}

export function synStreamFrame(streamId: number, flags: number, headerBlock: Buffer): Buffer {
  // stream ID, associated-to stream ID 0, priority 0 and slot 0.
  return controlFrame(FrameType.SYN_STREAM, flags, Buffer.concat([uint32s(streamId, 0), Buffer.alloc(2), headerBlock]));
}

export function synReplyFrame(streamId: number, flags: number, headerBlock: Buffer): Buffer {
  return controlFrame(FrameType.SYN_REPLY, flags, Buffer.concat([uint32s(streamId), headerBlock]));
}

export const rstStreamFrame = (streamId: number, status: number) =>
  controlFrame(FrameType.RST_STREAM, 0, uint32s(streamId, status));
export const pingFrame = (id: number) => controlFrame(FrameType.PING, 0, uint32s(id));
export const goAwayFrame = (lastStreamId: number, status: number) =>
  controlFrame(FrameType.GOAWAY, 0, uint32s(lastStreamId, status));
export const windowUpdateFrame = (streamId: number, delta: number) =>
  controlFrame(FrameType.WINDOW_UPDATE, 0, uint32s(streamId, delta));

/** The first 31-bit field of a control frame's data (a stream ID or a PING ID), or undefined when too short. */
export function firstWord(frame: SpdyFrame): number | undefined {
  return frame.data.length >= 4 ? frame.data.readUInt32BE(0) & 0x7fffffff : undefined;
}

/**
 * Cuts a byte stream into frames. A frame whose length is over `maxFrameBytes`, or a control
 * frame of another SPDY version, is a protocol error: the connection cannot be trusted after it.
 */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly maxFrameBytes: number) {}

  /** The frames completed by `chunk`; throws SpdyProtocolError on a frame it must not accept. */
  push(chunk: Buffer): SpdyFrame[] {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const frames: SpdyFrame[] = [];
    while (this.pending.length >= HEADER_BYTES) {
      const length = this.pending.readUInt32BE(4) & 0xffffff;
      if (length > this.maxFrameBytes) throw new SpdyProtocolError(`a frame over ${this.maxFrameBytes} bytes`);
      const first = this.pending.readUInt32BE(0);
      const control = (first & 0x80000000) !== 0;
      if (control && ((first >>> 16) & 0x7fff) !== SPDY_VERSION) throw new SpdyProtocolError('a frame of another SPDY version');
      if (this.pending.length < HEADER_BYTES + length) break;
      const flags = this.pending[4] ?? 0;
      const data = this.pending.subarray(HEADER_BYTES, HEADER_BYTES + length);
      frames.push(
        control ? { control, type: first & 0xffff, flags, data } : { control, streamId: first & 0x7fffffff, flags, data },
      );
      this.pending = this.pending.subarray(HEADER_BYTES + length);
    }
    return frames;
  }
}

export class SpdyProtocolError extends Error {}

/** An uncompressed header block: a 32-bit count, then each lower-case name and value with 32-bit lengths. */
export function encodeHeaders(headers: Record<string, string>): Buffer {
  const parts = [uint32s(Object.keys(headers).length)];
  for (const [name, value] of Object.entries(headers)) {
    const nameBytes = Buffer.from(name.toLowerCase(), 'utf8');
    const valueBytes = Buffer.from(value, 'utf8');
    parts.push(uint32s(nameBytes.length), nameBytes, uint32s(valueBytes.length), valueBytes);
  }
  return Buffer.concat(parts);
}

/** The names and values of an uncompressed header block; throws SpdyProtocolError when it does not parse. */
export function decodeHeaders(block: Buffer): Record<string, string> {
  const headers: Record<string, string> = {};
  const read = (offset: number): [Buffer, number] => {
    if (offset + 4 > block.length) throw new SpdyProtocolError('a truncated header block');
    const length = block.readUInt32BE(offset);
    if (offset + 4 + length > block.length) throw new SpdyProtocolError('a truncated header block');
    return [block.subarray(offset + 4, offset + 4 + length), offset + 4 + length];
  };
  if (block.length < 4) throw new SpdyProtocolError('a truncated header block');
  const count = block.readUInt32BE(0);
  let offset = 4;
  for (let index = 0; index < count; index += 1) {
    const [name, afterName] = read(offset);
    const [value, afterValue] = read(afterName);
    headers[name.toString('utf8')] = value.toString('utf8');
    offset = afterValue;
  }
  return headers;
}

/** One direction's header compression: a zlib stream primed with the dictionary, sync-flushed per block. */
export class HeaderCompressor {
  private readonly deflate = zlib.createDeflate({ dictionary: SPDY3_DICTIONARY });
  private queue: Promise<unknown> = Promise.resolve();

  constructor() {
    this.deflate.on('error', () => undefined);
  }

  compress(headers: Record<string, string>): Promise<Buffer> {
    const run = () =>
      new Promise<Buffer>((resolve, reject) => {
        const chunks: Buffer[] = [];
        const onData = (chunk: Buffer) => chunks.push(chunk);
        this.deflate.on('data', onData);
        this.deflate.write(encodeHeaders(headers));
        this.deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => {
          this.deflate.off('data', onData);
          if (this.deflate.destroyed) reject(new Error('header compression failed'));
          else resolve(Buffer.concat(chunks));
        });
      });
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  close(): void {
    this.deflate.destroy();
  }
}

/**
 * The other direction: inflates each header block in order in one context, refusing more than
 * `maxBytes` of output per block (a zlib bomb must not cost memory).
 */
export class HeaderDecompressor {
  private readonly inflate = zlib.createInflate({ dictionary: SPDY3_DICTIONARY });
  private queue: Promise<unknown> = Promise.resolve();
  private failed = false;

  constructor(private readonly maxBytes: number) {
    this.inflate.on('error', () => {
      this.failed = true;
    });
  }

  decompress(block: Buffer): Promise<Record<string, string>> {
    const run = () =>
      new Promise<Record<string, string>>((resolve, reject) => {
        if (this.failed) return reject(new SpdyProtocolError('an undecodable header block'));
        const chunks: Buffer[] = [];
        let total = 0;
        const onData = (chunk: Buffer) => {
          total += chunk.length;
          if (total > this.maxBytes) {
            this.failed = true;
            this.inflate.destroy();
          } else chunks.push(chunk);
        };
        this.inflate.on('data', onData);
        this.inflate.write(block);
        this.inflate.flush(zlib.constants.Z_SYNC_FLUSH, () => {
          this.inflate.off('data', onData);
          if (this.failed || this.inflate.destroyed)
            return reject(new SpdyProtocolError('an undecodable or oversized header block'));
          try {
            resolve(decodeHeaders(Buffer.concat(chunks)));
          } catch (error) {
            reject(error as Error);
          }
        });
      });
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  close(): void {
    this.inflate.destroy();
  }
}
