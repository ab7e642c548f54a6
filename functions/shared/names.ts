// The DNS label rule (RFC 1123) for every name etcd-guard turns into a Kubernetes object name, a
// file name or a namespace: lowercase letters, digits and '-', starting and ending with a letter
// or digit. Such a name can never hold a path separator or "..".

export const DNS_LABEL_MAX_LENGTH = 63;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Whether `text` is a DNS label of at most `maxLength` characters. */
export function isDnsLabel(text: string, maxLength: number = DNS_LABEL_MAX_LENGTH): boolean {
  return text.length <= maxLength && DNS_LABEL.test(text);
}
