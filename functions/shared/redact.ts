// Credentials must never be printed: a URL's user info (`https://user:pass@host`) is replaced
// wherever a URL may be shown (errors, logs, responses). Tenant text is shown only as a bounded excerpt.

const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]*@/gi;

/** `text` with the user info of every URL in it replaced by `REDACTED`. */
export function redactUrlUserinfo(text: string): string {
  return text.replace(URL_USERINFO, '$1REDACTED@');
}

/** True when `url` parses as a URL that carries a user name or password. */
export function hasUrlUserinfo(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.username !== '' || parsed.password !== '';
  } catch {
    return redactUrlUserinfo(url) !== url;
  }
}

/** Tenant text (an image tag, a version, a member name) in a message: a bounded, printable excerpt only. */
export function printableExcerpt(text: string, maxChars = 40): string {
  const printable = text.replace(/[^\x21-\x7e]/g, '?');
  return printable.length > maxChars ? `${printable.slice(0, maxChars - 3)}...` : printable;
}
