// Fastify compiles every route's request and response schemas when the route is added: ~170 ms of
// each API start for the ~100 routes, most of which a process never serves. Here each schema is
// compiled on the first request that needs it instead, by the same compilers with the same options.
// A schema that cannot compile then fails that request rather than the start: `compileAll` compiles
// every one at once (test/integration/api-observability.test.ts calls it on a server with every route).

import AjvCompiler, { type BuildCompilerFromPool } from "@fastify/ajv-compiler";
import SerializerSelector, { type SerializerFactory } from "@fastify/fast-json-stringify-compiler";

/** A validation function as fastify calls it: the result, then `errors` when it failed. */
type Validate = ((data: unknown) => unknown) & { errors?: unknown };
type Serializer = (data: unknown) => string;

/** Compilations not yet done, per server (a server's routes share its compilers). */
export class LazySchemas {
  private readonly pending = new Set<() => void>();

  /** Per route: a getter that compiles on its first call (and is listed for compileAll until then). */
  private deferred<R, F>(compile: (route: R) => F, route: R): () => F {
    let fn: F | null = null;
    const make = (): F => {
      this.pending.delete(make);
      fn ??= compile(route);
      return fn;
    };
    this.pending.add(make);
    return () => fn ?? make();
  }

  /** Wraps a validator compiler: the validation function is made when first called. */
  validator<R, V extends Validate>(compile: (route: R) => V): (route: R) => V {
    return (route) => {
      const real = this.deferred(compile, route);
      const lazy: Validate = (data: unknown) => {
        const fn = real();
        const result = fn(data);
        // Fastify reads the errors of a failed validation from the function it called.
        lazy.errors = fn.errors;
        return result;
      };
      return lazy as V;
    };
  }

  /** Wraps a serializer compiler: the serializer is made when first called. */
  serializer<R>(compile: (route: R) => Serializer): (route: R) => Serializer {
    return (route) => {
      const real = this.deferred(compile, route);
      return (data: unknown) => real()(data);
    };
  }

  /** The compilers fastify would build itself, made lazy (for `schemaController`). */
  factories(): { buildValidator: BuildCompilerFromPool; buildSerializer: SerializerFactory } {
    const buildValidator = AjvCompiler();
    const buildSerializer = SerializerSelector();
    return {
      buildValidator: (external, options) => this.validator(buildValidator(external, options)),
      buildSerializer: (external, options) => this.serializer(buildSerializer(external, options)),
    };
  }

  /** Compiles every schema not compiled yet; throws what the first that cannot compile throws. */
  compileAll(): number {
    const all = [...this.pending];
    for (const make of all) make();
    return all.length;
  }
}
