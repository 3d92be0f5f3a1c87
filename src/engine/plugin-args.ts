// How plugin args are judged, below the engine so the engine's own parsers (match/exec expressions,
// rule lists) can report problems the registry locates: a problem at a path inside `args`, the
// references to other plugins found in them, and what a check may ask of the running build.
// The plugin contract (src/registry/types.ts) re-exports these for plugin definitions.

export type PluginKind = "server" | "executor" | "matcher" | "provider";

/** A reference from one plugin's args to another plugin, found without creating anything. */
export interface DependencySpec {
  /** Path of the referencing value inside `args` (rendered as the field name, and located in YAML). */
  argsPath: (string | number)[];
  target: string;
  kind: PluginKind;
  /** Set when only one type will do (jump/goto need a `sequence`). */
  pluginType?: string;
  /** A type the target may not have, and why (a cron job cannot run another cron). */
  refuseType?: { type: string; reason: string };
}

/** A problem in a plugin's args, located by its path inside `args`. */
export interface ArgProblem {
  path: (string | number)[];
  message: string;
}

/** Thrown by shorthand/quick-setup parsers and factories for bad args; the registry locates it. */
export class ArgError extends Error {
  readonly path: (string | number)[];
  constructor(message: string, path: (string | number)[] = []) {
    super(message);
    this.name = "ArgError";
    this.path = path;
  }
}

/** Runs a parser only for its errors: an ArgError becomes a problem; anything else propagates. */
export function argProblems(parse: () => unknown): ArgProblem[] {
  try {
    parse();
    return [];
  } catch (err) {
    if (err instanceof ArgError) return [{ path: err.path, message: err.message }];
    throw err;
  }
}

/** What a check may ask of the running build (quick setups are validated by their own type's parser). */
export interface CheckEnv {
  /** Validates a quick-setup expression `type param` for a kind; returns problems and deps. */
  quickSetup(kind: "executor" | "matcher", expr: string, at: (string | number)[]): { problems: ArgProblem[]; deps: DependencySpec[] };
  /** Whether `word` is an executor type of this build (a cron executor `word ...` is then a quick setup, else a tag). */
  isExecutorType(word: string): boolean;
  /** Null when network.outbound has a profile `name` (an `outbound` arg names one); otherwise why not. */
  outboundProblem(name: string): string | null;
  /**
   * The names declared in namespace `space` (`client`, `group`) and the tag of the plugin declaring
   * them (`declares` of its definition); null when no plugin of the configuration declares any.
   */
  declared(space: string): DeclaredNames | null;
}

export interface DeclaredNames {
  tag: string;
  names: ReadonlySet<string>;
}
