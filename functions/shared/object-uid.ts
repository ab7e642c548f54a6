// metadata.uid of an object the API server served, for an Event's `regarding`. kubectl describe
// finds an object's Events with a field selector on involvedObject.uid whenever the object has a
// uid (kubectl pkg/describe searchEvents, from client-go tools/reference GetReference), so an Event
// without it never shows there. The API server generates uids as RFC 4122 UUIDs, but what reaches
// us is whatever the listed object or the AdmissionReview says: untrusted text. Only a short run
// of letters and digits joined by '-' is taken; anything else is no uid (the Event goes without
// one) rather than junk written into an Event or a crash.

/** A UUID is 36 characters; a little room for other API servers' forms, and no more. */
export const MAX_OBJECT_UID_LENGTH = 64;

const OBJECT_UID = /^[0-9A-Za-z](?:[0-9A-Za-z-]*[0-9A-Za-z])?$/;

/** `value` when it looks like a uid the API server gave an object; undefined otherwise. */
export function objectUid(value: unknown): string | undefined {
  return typeof value === 'string' && value.length <= MAX_OBJECT_UID_LENGTH && OBJECT_UID.test(value) ? value : undefined;
}
