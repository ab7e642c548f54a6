// NO_PROXY as Go reads it (issue 30 item 11: `.0.0.1` once matched the IP 127.0.0.1 as a domain
// suffix). The expectations are Go's own: golang.org/x/net/http/httpproxy's TestUseProxy table
// (proxy_test.go, UseProxyTests with its `noProxy` list, every host on port 80), whose rules
// Go 1.26 vendors into net/http, plus rows for the IP-versus-domain cases, each checked against
// http.ProxyFromEnvironment of Go 1.26. Go's first rows (localhost and loopback are never proxied)
// are left out on purpose: the guard sends loopback to the proxy unless NO_PROXY covers it
// (functions/adapters/workload-tunnel.ts says why).
import { describe, expect, it } from 'vitest';
import { proxyFor } from './workload-tunnel.js';

const GO_NO_PROXY =
  'foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, 192.168.1.3:80, 10.0.0.0/30, ' +
  '2001:db8::52:0:1, [2001:db8::52:0:2]:443, [2001:db8::52:0:3]:80, 2002:db8:a::45/64';

const proxied = (url: string, noProxy: string) =>
  proxyFor(new URL(url), { HTTPS_PROXY: 'http://proxy:3128', NO_PROXY: noProxy }) !== undefined;

describe('NO_PROXY read as Go’s httpproxy reads it (issue 30 item 11)', () => {
  it.each([
    ['192.168.1.1', false, 'matches exact IPv4'],
    ['192.168.1.2', true, 'ports do not match'],
    ['192.168.1.3', false, 'matches exact IPv4:port'],
    ['192.168.1.4', true, 'no match'],
    ['10.0.0.2', false, 'matches IPv4/CIDR'],
    ['[2001:db8::52:0:1]', false, 'matches exact IPv6'],
    ['[2001:db8::52:0:2]', true, 'no match (the entry’s port is 443)'],
    ['[2001:db8::52:0:3]', false, 'matches exact [IPv6]:port'],
    ['[2002:db8:a::123]', false, 'matches IPv6/CIDR'],
    ['[fe80::424b:c8be:1643:a1b6]', true, 'no match'],
    ['barbaz.net', true, 'does not match as .barbaz.net'],
    ['www.barbaz.net', false, 'does match as .barbaz.net'],
    ['foobar.com', false, 'does match as foobar.com'],
    ['www.foobar.com', false, 'match because NO_PROXY includes "foobar.com"'],
    ['foofoobar.com', true, 'not match as a part of foobar.com'],
    ['baz.com', true, 'not match as a part of barbaz.com'],
    ['localhost.net', true, 'not match as suffix of address'],
    ['local.localhost', true, 'not match as prefix as address'],
    ['barbarbaz.net', true, 'not match, wrong domain'],
    ['wildcard.io', true, 'does not match as *.wildcard.io'],
    ['nested.wildcard.io', false, 'match as *.wildcard.io'],
    ['awildcard.io', true, 'not a match because of *'],
  ])('Go’s UseProxyTests: %s:80 proxied %s (%s)', (host, expected) => {
    expect(proxied(`https://${host}:80`, GO_NO_PROXY)).toBe(expected);
  });

  it.each([
    ['.0.0.1', 'https://127.0.0.1', true, 'a domain entry never covers an IP literal (Go skips loopback before)'],
    ['.0.0.1', 'https://10.0.0.1', true, 'a domain entry never covers an IP literal'],
    ['0.0.1', 'https://10.0.0.1', true, 'not an IP, so a domain entry'],
    ['.0.1.example', 'https://10.0.1.example', false, 'a name ending in the suffix is covered'],
    ['*.1', 'https://10.0.0.1', true, 'a wildcard domain never covers an IP literal'],
    ['10.0.0.1', 'https://[::ffff:10.0.0.1]', false, 'an IPv4-mapped IPv6 address is the IPv4 address (Go’s IP.Equal)'],
    ['10.0.0.0/8', 'https://[::ffff:10.1.2.3]', false, 'a CIDR covers the IPv4-mapped form too'],
    ['10.0.0.0/8:443', 'https://10.1.2.3', true, 'a CIDR with a port is no CIDR, and as a domain covers no IP'],
    ['10.0.0.0/33', 'https://10.1.2.3', true, 'a prefix longer than the address is no CIDR'],
    ['10.0.0.1:443', 'https://10.0.0.1', false, 'the port matches (443 is https’s default)'],
    ['10.0.0.1:6443', 'https://10.0.0.1', true, 'the port differs'],
    ['example.com:', 'https://api.example.com', false, 'an empty port is any port'],
    ['EXAMPLE.com', 'https://api.example.com', false, 'entries are case-insensitive'],
    [':443', 'https://example.com', true, 'an entry without a host is ignored'],
    ['[::1]', 'https://[::2]', true, 'a bracketed IPv6 without a port is a domain entry'],
    ['example.com, *', 'https://10.9.8.7', false, '* covers everything'],
  ])('NO_PROXY %j for %s: proxied %s (%s)', (noProxy, url, expected) => {
    expect(proxied(url, noProxy)).toBe(expected);
  });
});
