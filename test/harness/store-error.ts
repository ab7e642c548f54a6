// Store and adapter calls promise to fail with our StoreError, never a library's error shape.
import { StoreError } from '../../functions/domain/store.js';

/** The StoreError `promise` rejects with; fails the test if it succeeds or rejects with anything else. */
export async function captureStoreError(promise: Promise<unknown>): Promise<StoreError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof StoreError) return error;
    throw new Error(`expected a StoreError, got ${String(error)}`);
  }
  throw new Error('expected a StoreError, but the call succeeded');
}
