// Evaluations cached as files: DIR/<target>.json. The default for local runs.
// Writes go to a temp file in the same directory, are fsynced, then renamed over the target, so a
// reader sees the old document or the new one, never a torn one (rename is atomic on POSIX).
//
// Newest-wins: within one process writes to a file are serialized (across all instances) and each compares with what
// is on disk first. Across processes the compare-then-rename is not atomic: if two processes
// write the same target at the same instant, the one renaming last wins even if it is older.
// That window is a few milliseconds and the next scheduled evaluation repairs it; stores that
// several writers share should be ConfigMaps, whose writes are conditional on resourceVersion.
//
// The document is the Evaluation JSON plus a top-level "sequence": the previous file's + 1, read
// and written inside the same serialized compare-then-rename, so readers order documents by write,
// not by a writer's wall clock. The single-writer caveat above applies: two processes racing can
// both write the same number (the later rename wins, as for the document itself).
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Evaluation } from '../domain/evaluation-document.js';
import { isDnsLabel } from '../shared/names.js';
import {
  invalidEvaluationError,
  parseSequence,
  parseStoredEvaluation,
  StoreError,
  nextSequence,
  writeDecision,
  type EvaluationStore,
  type SequencedEvaluation,
  type StoreErrorKind,
  type WriteOutcome,
} from '../domain/store.js';

function errnoCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function kindForErrno(code: string | undefined): StoreErrorKind {
  return code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? 'forbidden' : 'unavailable';
}

/** The ConfigMap store's limit, and far more than an evaluation of a 9-member cluster needs. */
export const MAX_STORED_EVALUATION_BYTES = 1024 * 1024;

/**
 * The text of `file`, null when it does not exist, or a 'corrupt' StoreError when it is not a
 * regular file or is larger than MAX_STORED_EVALUATION_BYTES (writes then replace it). Opened
 * non-blocking and checked with fstat on the open descriptor, so a FIFO cannot block a libuv thread
 * and a link to /dev/zero or a huge file cannot fill memory. Symlinks are followed, so a directory
 * mounted from a ConfigMap volume (..data links) still works; what they point at is checked.
 */
async function readRegularFile(file: string): Promise<string | null | StoreError> {
  let handle: FileHandle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw error;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) return new StoreError('corrupt', `${file} is not a regular file; not using it`);
    if (info.size > MAX_STORED_EVALUATION_BYTES) return tooLarge(file, info.size);
    // Sized by fstat, not the limit: every write reads the document it replaces, and a zero-filled
    // 1 MiB buffer for a document of a few KiB was garbage on each. The size can change between fstat and read:
    // a full buffer grows to one byte past the limit, so at most that much is ever read.
    let buffer = Buffer.allocUnsafe(info.size + 1);
    let length = 0;
    for (;;) {
      if (length === buffer.length) {
        const bigger = Buffer.allocUnsafe(MAX_STORED_EVALUATION_BYTES + 1);
        buffer.copy(bigger, 0, 0, length);
        buffer = bigger;
      }
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > MAX_STORED_EVALUATION_BYTES) return tooLarge(file, length);
      // A regular file reads short only at its end: the buffer, one byte larger than fstat said,
      // not filled means the whole file is in, without a read that returns nothing.
      if (length < buffer.length) break;
    }
    return buffer.subarray(0, length).toString('utf8');
  } finally {
    await handle.close();
  }
}

function tooLarge(file: string, bytes: number): StoreError {
  return new StoreError(
    'corrupt',
    `${file} holds ${bytes} bytes or more, over the ${MAX_STORED_EVALUATION_BYTES} bytes (1 MiB) a stored evaluation may have; not using it`,
  );
}

/**
 * Tail of the write chain per file, shared by every FileStore in the process (two instances on
 * one directory must not race each other): each write waits for the previous one to finish.
 */
const writeChains = new Map<string, Promise<unknown>>();

export class FileStore implements EvaluationStore {
  readonly dir: string;
  private readonly now: () => Date;
  /** Set once the directory was made: a write then makes it again only when it has gone. */
  private directoryMade = false;

  /** `options.now`: the writer's clock (tests set a skewed one); the filesystem's mtime is the store's. */
  constructor(dir: string, options: { now?: () => Date } = {}) {
    if (dir.trim() === '') throw new StoreError('invalid', 'the file store needs a directory (got an empty string)');
    this.dir = path.resolve(dir);
    this.now = options.now ?? (() => new Date());
  }

  describe(): string {
    return `file:${this.dir}`;
  }

  /** DIR/<target>.json, refusing any name that could point outside DIR. */
  pathFor(target: string): string {
    // A DNS label, like config target names: it can never hold a path separator or "..".
    if (!isDnsLabel(target)) {
      throw new StoreError(
        'invalid',
        `invalid target name ${JSON.stringify(target)} for the file store: want a DNS label (lowercase letters, digits, '-'), so it stays inside ${this.dir}`,
      );
    }
    const file = path.join(this.dir, `${target}.json`);
    // Belt and braces: the regex already rules out separators, but the invariant is what matters.
    if (path.dirname(file) !== this.dir) {
      throw new StoreError('invalid', `target name ${JSON.stringify(target)} would leave ${this.dir}`);
    }
    return file;
  }

  async read(target: string): Promise<Evaluation | null> {
    return (await this.readSequenced(target))?.evaluation ?? null;
  }

  async readSequenced(target: string): Promise<SequencedEvaluation | null> {
    const file = this.pathFor(target);
    const stored = await this.readFileEvaluation(file, target);
    if (stored instanceof StoreError) throw stored;
    return stored;
  }

  write(evaluation: Evaluation): Promise<WriteOutcome> {
    const invalid = invalidEvaluationError(evaluation);
    if (invalid !== null) return Promise.reject(invalid);
    let file: string;
    try {
      file = this.pathFor(evaluation.target);
    } catch (error) {
      return Promise.reject(error);
    }
    const previous = writeChains.get(file) ?? Promise.resolve();
    const next = previous.then(
      () => this.writeNow(file, evaluation),
      () => this.writeNow(file, evaluation),
    );
    writeChains.set(file, next);
    // Forget the chain once idle so the map does not grow with every target ever written.
    void next.then(
      () => this.forgetIfIdle(file, next),
      () => this.forgetIfIdle(file, next),
    );
    return next;
  }

  private forgetIfIdle(file: string, settled: Promise<unknown>): void {
    if (writeChains.get(file) === settled) writeChains.delete(file);
  }

  /** The evaluation and sequence in `file`, null when absent, or a StoreError (corrupt / unreadable). */
  private async readFileEvaluation(file: string, target: string): Promise<SequencedEvaluation | null | StoreError> {
    let text: string | null | StoreError;
    try {
      text = await readRegularFile(file);
    } catch (error) {
      const code = errnoCode(error);
      return new StoreError(kindForErrno(code), `cannot read ${file}: ${code ?? (error as Error).message}`, { cause: error });
    }
    if (text === null || text instanceof StoreError) return text;
    const evaluation = parseStoredEvaluation(text, target, { source: file, holder: file });
    if (evaluation instanceof StoreError) return evaluation;
    // The text parsed as an Evaluation above, so it is a JSON object.
    const sequence = parseSequence((JSON.parse(text) as { sequence?: unknown }).sequence, file);
    return sequence instanceof StoreError ? sequence : { evaluation, sequence };
  }

  private async writeNow(file: string, evaluation: Evaluation): Promise<WriteOutcome> {
    const stored = await this.readFileEvaluation(file, evaluation.target);
    // Unreadable for a reason other than content (EACCES, EIO): writing would likely fail too,
    // and we cannot know what we would overwrite.
    if (stored instanceof StoreError && stored.kind !== 'corrupt') throw stored;
    const held = stored instanceof StoreError ? null : stored;
    // A corrupt document's sequence is not trusted: the count restarts at 1.
    const sequence = nextSequence(held?.sequence ?? 0);
    if (!this.directoryMade) await this.makeDirectory();
    // Hidden, unique, same directory (rename must not cross filesystems), never "<target>.json".
    const temp = path.join(this.dir, `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      const handle = await this.openTemp(temp);
      let decision: ReturnType<typeof writeDecision>;
      try {
        // The new file's mtime is the store's clock: the one every reader of this directory shares.
        const writerNowMs = this.now().getTime();
        decision = writeDecision(evaluation, held?.evaluation ?? null, {
          writerNowMs,
          storeNowMs: (await handle.stat()).mtimeMs,
        });
        if (decision.write) {
          await handle.writeFile(`${JSON.stringify({ ...decision.evaluation, sequence }, null, 2)}\n`, 'utf8');
          await handle.sync();
        }
      } finally {
        await handle.close();
      }
      if (!decision.write) {
        await unlink(temp);
        return { written: false, keptEvaluatedAt: held?.evaluation.evaluatedAt ?? '' };
      }
      await rename(temp, file);
      await this.syncDirectory();
      return decision.stampCorrectedByMs === undefined
        ? { written: true }
        : { written: true, stampCorrectedByMs: decision.stampCorrectedByMs };
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      // The directory could not be made again: that error already says why.
      if (error instanceof StoreError) throw error;
      const code = errnoCode(error);
      throw new StoreError(kindForErrno(code), `cannot write ${file}: ${code ?? (error as Error).message}`, { cause: error });
    }
  }

  /** The new temp file; the directory is made again first when it was removed since. */
  private async openTemp(temp: string): Promise<FileHandle> {
    try {
      return await open(temp, 'wx', 0o644);
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') throw error;
      this.directoryMade = false;
      await this.makeDirectory();
      return open(temp, 'wx', 0o644);
    }
  }

  private async makeDirectory(): Promise<void> {
    try {
      await mkdir(this.dir, { recursive: true });
      this.directoryMade = true;
    } catch (error) {
      const code = errnoCode(error);
      throw new StoreError(kindForErrno(code), `cannot create directory ${this.dir}: ${code ?? (error as Error).message}`, {
        cause: error,
      });
    }
  }

  /** Makes the rename itself durable; best effort, since some filesystems refuse dir fsync. */
  private async syncDirectory(): Promise<void> {
    try {
      const handle = await open(this.dir, 'r');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    } catch {
      // The data is already in place and readable; only crash-durability of the rename is lost.
    }
  }
}
