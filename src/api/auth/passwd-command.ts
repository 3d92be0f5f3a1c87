// sluice passwd [--cost LN]: prints a password hash for api.http.auth.users (passwords.ts). The
// password is typed twice at the terminal without echo or, when stdin is not a terminal, read from
// its first line; never from the command line, where ps and the shell's history would show it.
// stdout gets the hash and nothing else (prompts go to stderr), so `$(sluice passwd)` captures it.

import { createInterface } from "node:readline";
import { Writable } from "node:stream";
import { parseArguments, UsageError, type OptionSpec } from "../../cli-args.js";
import { MAX_PASSWORD } from "./authenticator.js";
import { DEFAULT_PARAMS, hashPassword } from "./passwords.js";

const MIN_COST = 10;
const MAX_COST = 20;

export const PASSWD_HELP = `Usage:
  sluice passwd [--cost LN]

Prints a password hash for api.http.auth.users[].password_hash ($scrypt$ln=…,r=…,p=…$salt$key),
one line on stdout. The password is typed twice at the terminal (it is not shown), or, when stdin
is not a terminal, read from the first line of stdin:

  printf '%s\\n' "$PASSWORD" | sluice passwd

It is never taken from the command line: ps and the shell's history would show it.

Options:
  --cost LN   scrypt cost, log2 of N, ${MIN_COST} to ${MAX_COST} (default ${DEFAULT_PARAMS.ln}: 32 MiB and some tens of
              milliseconds per sign-in check; each step up doubles both)

Exit status: 0 when the hash is printed, 1 when there is no password to hash (empty, the two typed
differ, longer than ${MAX_PASSWORD} characters), 2 for a mistake on the command line, 130 on Ctrl-C.
`;

const OPTIONS: OptionSpec = { cost: { type: "string" } };

/** Ctrl-C at the prompt. */
class Cancelled extends Error {}

function cost(text: string | undefined): number {
  if (text === undefined) return DEFAULT_PARAMS.ln;
  if (!/^\d{1,2}$/.test(text) || Number(text) < MIN_COST || Number(text) > MAX_COST) {
    throw new UsageError(`--cost must be a whole number from ${MIN_COST} to ${MAX_COST} (log2 of scrypt's N), not '${text}'`);
  }
  return Number(text);
}

/** What keeps `password` from being hashed, or null. */
function problem(password: string): string | null {
  if (password.length === 0) return "an empty password is refused";
  if (password.length > MAX_PASSWORD) return `a password is at most ${MAX_PASSWORD} characters (a longer one could never sign in)`;
  return null;
}

/** Asks twice on the terminal; what is typed is not echoed (readline writes its echo to a sink). */
async function fromTerminal(input: NodeJS.ReadStream, prompts: NodeJS.WriteStream): Promise<string> {
  const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
  const rl = createInterface({ input, output: sink, terminal: true });
  let cancelled = false;
  rl.on("SIGINT", () => {
    cancelled = true;
    rl.close();
  });
  // The iterator keeps lines that arrive before they are asked for (a paste of both at once).
  const lines = rl[Symbol.asyncIterator]();
  const ask = async (prompt: string): Promise<string> => {
    prompts.write(prompt);
    const next = await lines.next();
    // Enter was not echoed either: end the prompt's line.
    prompts.write("\n");
    if (cancelled) throw new Cancelled();
    if (next.done === true) throw new Error("no password given (end of input)");
    return String(next.value);
  };
  try {
    const first = await ask("Password: ");
    const refused = problem(first);
    if (refused !== null) throw new Error(refused);
    const second = await ask("Password again: ");
    if (second !== first) throw new Error("the two passwords differ; nothing was printed");
    return first;
  } finally {
    rl.close();
  }
}

/** The first line of a piped stdin, without its line end (\n or \r\n); nothing else is read once it is complete. */
async function firstLine(input: NodeJS.ReadStream): Promise<string> {
  input.setEncoding("utf8");
  let text = "";
  for await (const chunk of input) {
    text += String(chunk);
    const end = text.indexOf("\n");
    if (end >= 0) {
      text = text.slice(0, end);
      break;
    }
    // No line end in sight: enough read to refuse it.
    if (text.length > MAX_PASSWORD + 1) break;
  }
  return text.endsWith("\r") ? text.slice(0, -1) : text;
}

/** Runs `sluice passwd ARGS`; the exit status. Throws UsageError for a mistake on the command line, Error for a password refused. */
export async function runPasswdCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArguments(argv, OPTIONS);
  // Not echoed back: the argument may well be the password.
  if (positionals.length > 0) {
    throw new UsageError("sluice passwd takes no password argument: on the command line it would be visible to every user in ps and kept in the shell's history. Type it at the prompt, or pipe it on stdin");
  }
  const ln = cost(values.cost as string | undefined);
  let password: string;
  if (process.stdin.isTTY) {
    try {
      password = await fromTerminal(process.stdin, process.stderr);
    } catch (err) {
      if (err instanceof Cancelled) return 130;
      throw err;
    }
  } else {
    password = await firstLine(process.stdin);
    const refused = problem(password);
    if (refused !== null) throw new Error(refused);
  }
  process.stdout.write(`${await hashPassword(password, { ...DEFAULT_PARAMS, ln })}\n`);
  return 0;
}
