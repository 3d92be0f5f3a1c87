// Roles of the management API, least to most: each role may do what the ones below it may. Every
// route declares the least role it needs next to its schema (`schema.role`, a plugin route's `role`);
// `public` routes need no credentials at all (signing in).

export const ROLES = ["metrics", "viewer", "operator", "admin"] as const;
export type Role = (typeof ROLES)[number];
export type RouteRole = Role | "public";

export const isRole = (value: unknown): value is Role => typeof value === "string" && (ROLES as readonly string[]).includes(value);

/** True when `held` is `needed` or above it. */
export function roleAllows(held: Role, needed: RouteRole): boolean {
  return needed === "public" || ROLES.indexOf(held) >= ROLES.indexOf(needed);
}
