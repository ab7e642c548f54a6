/** The stand-in's global resourceVersion: one counter every write bumps, like etcd's revision. */
export class Revision {
  private value = 1;

  bump(): number {
    this.value += 1;
    return this.value;
  }

  current(): number {
    return this.value;
  }
}
