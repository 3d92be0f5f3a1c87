// Which address-list rows a plugin owns, and who may clean them up.
//
// Ownership is written in each row's comment: `<comment_prefix>;plugin=<tag>;kind=D;domain=<name>` for
// an address a DNS answer gave (dynamic), `<comment_prefix>;plugin=<tag>;kind=P` for a configured
// persistent one; a row without that start is someone else's and is never changed or removed. So the
// prefix and the tag may not hold `;` or `=`.
//
// Claims hand a plugin's rows over across a reload: the new configuration's instance is created while
// the old one still serves, and claims the same lists of the same router under the same prefix and tag.
// When the old one is destroyed it leaves the lists a live successor claims (the successor's start-up
// scan has taken their rows over), so a reload opens no gap in the lists even with cleanup_on_shutdown.
// Process-wide, like the listeners a reload hands over.

export type RowKind = "D" | "P";

export class Ownership {
  readonly base: string;

  constructor(prefix: string, tag: string) {
    this.base = `${prefix};plugin=${tag}`;
  }

  comment(kind: RowKind, domain?: string): string {
    return kind === "P" || domain === undefined || domain === "" ? `${this.base};kind=${kind}` : `${this.base};kind=${kind};domain=${domain.slice(0, 200)}`;
  }

  /** The kind of a row this plugin owns (a row of ours without a readable kind counts as dynamic), null for anyone else's. */
  kindOf(comment: string | undefined): RowKind | null {
    if (comment === undefined || (comment !== this.base && !comment.startsWith(`${this.base};`))) return null;
    // The kind follows the owner; the domain, which could hold anything, comes after it.
    return /^;kind=P(?:;|$)/.test(comment.slice(this.base.length)) ? "P" : "D";
  }
}

const claims = new Map<string, Set<object>>();

/** The claim key of one list: the router, the owner's comment start and the list. */
export const claimKey = (router: string, ownership: Ownership, family: 4 | 6, list: string): string => `${router}|${ownership.base}|${family}|${list}`;

/** Claims `keys` for `owner` until the returned function is called. */
export function claim(keys: readonly string[], owner: object): () => void {
  for (const k of keys) {
    let set = claims.get(k);
    if (!set) claims.set(k, (set = new Set()));
    set.add(owner);
  }
  return () => {
    for (const k of keys) {
      const set = claims.get(k);
      set?.delete(owner);
      if (set?.size === 0) claims.delete(k);
    }
  };
}

/** Whether another live instance claims `key` (a newer configuration of the same plugin). */
export const claimedByAnother = (key: string, owner: object): boolean => [...(claims.get(key) ?? [])].some((o) => o !== owner);
