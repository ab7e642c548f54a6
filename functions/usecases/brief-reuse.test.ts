import { describe, expect, it } from 'vitest';
import { BriefReuse } from './brief-reuse.js';

function counted(reuse: BriefReuse<string>) {
  const loads: string[] = [];
  const get = (key: string, fail = false) =>
    reuse.get(key, () => {
      loads.push(key);
      return fail ? Promise.reject(new Error(`cannot load ${key}`)) : Promise.resolve(`${key}#${loads.length}`);
    });
  return { loads, get };
}

describe('BriefReuse: what a recent load got, for a bounded time', () => {
  it('shares a load in flight, keeps it inside the window and loads again at its end', async () => {
    let now = 0;
    const { loads, get } = counted(new BriefReuse<string>(5_000, () => now));
    const [first, second] = await Promise.all([get('a'), get('a')]);
    expect([first, second]).toEqual(['a#1', 'a#1']);
    now = 4_999;
    expect(await get('a')).toBe('a#1');
    now = 5_000;
    expect(await get('a')).toBe('a#2');
    expect(loads).toEqual(['a', 'a']);
  });

  it('keeps no failed load: the next caller loads again at once', async () => {
    const { loads, get } = counted(new BriefReuse<string>(5_000, () => 0));
    await expect(get('a', true)).rejects.toThrow('cannot load a');
    expect(await get('a')).toBe('a#2');
    expect(loads).toEqual(['a', 'a']);
  });

  it('keeps at most its bound, letting go of the one loaded longest ago', async () => {
    let now = 0;
    const { loads, get } = counted(new BriefReuse<string>(5_000, () => now, 2));
    await get('a');
    now = 1;
    await get('b');
    now = 2;
    await get('c');
    await get('b');
    await get('a');
    expect(loads).toEqual(['a', 'b', 'c', 'a']);
  });

  it('clear() forgets every value', async () => {
    const reuse = new BriefReuse<string>(5_000, () => 0);
    const { loads, get } = counted(reuse);
    await get('a');
    reuse.clear();
    await get('a');
    expect(loads).toEqual(['a', 'a']);
  });
});
