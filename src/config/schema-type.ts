// The TypeScript type of the JSON a response schema describes, computed from the `as const` schema
// itself, so a client that reads the answer (the dashboard, through webui/src/shapes.ts) is checked
// against the schema fastify serialises with. Covers the keywords our response schemas use: type
// (one or a list), enum, const, properties with required (the others are optional: the serialiser
// leaves out what is missing), additionalProperties (true or a schema), items, anyOf; `{}` is unknown.
// Type-level only: no runtime code, and no import of anything that runs on the server.

type Primitive<T> = T extends "string" ? string : T extends "integer" | "number" ? number : T extends "boolean" ? boolean : T extends "null" ? null : never;

type Required<S> = S extends { readonly required: readonly (infer R)[] } ? R : never;

/** Spelled out so editors and error messages show the fields rather than an intersection. */
type Flat<T> = { [K in keyof T]: T[K] } & {};

type Properties<S> = S extends { readonly properties: infer P }
  ? Flat<{ -readonly [K in keyof P as K extends Required<S> ? K : never]: FromSchema<P[K]> } & { -readonly [K in keyof P as K extends Required<S> ? never : K]?: FromSchema<P[K]> }>
  : unknown;

type Additional<S> = S extends { readonly additionalProperties: true } ? Record<string, unknown> : S extends { readonly additionalProperties: infer A extends object } ? Record<string, FromSchema<A>> : unknown;

type ObjectOf<S> = S extends { readonly properties: object } | { readonly additionalProperties: object | true } ? Properties<S> & Additional<S> : Record<string, unknown>;

type ArrayOf<S> = S extends { readonly items: infer I } ? FromSchema<I>[] : unknown[];

type OfType<S, T> = T extends "object" ? ObjectOf<S> : T extends "array" ? ArrayOf<S> : Primitive<T>;

/** The value a JSON schema (written `as const`) accepts. */
export type FromSchema<S> = S extends { readonly anyOf: readonly (infer A)[] }
  ? FromSchema<A>
  : S extends { readonly const: infer C }
    ? C
    : S extends { readonly enum: readonly (infer E)[] }
      ? E
      : S extends { readonly type: infer T }
        ? T extends readonly (infer U)[]
          ? OfType<S, U>
          : OfType<S, T>
        : unknown;
