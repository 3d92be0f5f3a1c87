// Which part of the service this process is. With `workers: 1` (the default) one process does
// everything ("single"). With more, the primary keeps the control plane — the API, every actor,
// the recorder's writer and readers, cron, downloads — and the workers (src/app/workers/) run the
// listeners, the sequences and the per-query plugins. The few plugins whose work differs by role
// read it here; messages between the two sides go through a ProcessChannel (control plane only:
// batches and acknowledgements, never a message per query).

/** A message between the primary and a worker: a type, the plugin tag it is for, and its data. */
export interface ChannelMessage {
  t: string;
  /** The plugin tag (or "" for the process itself). */
  key: string;
  [field: string]: unknown;
}

/** Answers the process that sent a message (on the primary: that worker; on a worker: the primary). */
export type Reply = (message: ChannelMessage) => boolean;

export interface ProcessChannel {
  /** Sends to the other side (a worker: to the primary); false when the channel is closed or its backlog is too long. */
  send(message: ChannelMessage): boolean;
  /** Takes the messages of type `t` for `key` (the latest taker of a pair gets them); returns the removal. */
  listen(t: string, key: string, handler: (message: ChannelMessage, reply: Reply) => void): () => void;
}

export interface ServerAddress {
  protocol: string;
  address: string;
  port: number;
}

/** The primary's data-plane workers as the health record shows them. */
export interface WorkersStatus {
  expected: number;
  alive: number;
  restarts: number;
}

/** One worker's answer to a question of the primary (askWorkers). */
export interface WorkerAnswer {
  worker: number;
  answer: ChannelMessage;
}

/** The type of an answer: `{ t: ANSWER, key: "", id, ...payload }`, `id` being the question's. */
export const ANSWER = "answer";

/** Answers a question of the primary (a message carrying `id`) with `payload`. */
export function answer(question: ChannelMessage, reply: Reply, payload: Record<string, unknown>): boolean {
  return reply({ ...payload, t: ANSWER, key: "", id: question.id });
}

export type ProcessRole =
  | { readonly kind: "single" }
  | {
      readonly kind: "primary";
      readonly workers: number;
      readonly channel: ProcessChannel;
      /** Where the workers' server of that tag listens (the real port when the configuration said 0); null before one said. */
      serverAddress(tag: string): ServerAddress | null;
      /**
       * Asks every serving worker's taker of (`message.t`, `message.key`), which answers with answer(),
       * and gathers the answers in worker order. A worker without a taker, or that has not answered
       * within `timeoutMs`, is left out.
       */
      askWorkers(message: ChannelMessage, timeoutMs: number): Promise<WorkerAnswer[]>;
    }
  | { readonly kind: "worker"; readonly index: number; readonly channel: ProcessChannel };

export const SINGLE: ProcessRole = { kind: "single" };

/**
 * A message's handlers by type and key, for either side's channel. The latest taker of a pair gets
 * the messages; when it lets go, the one before it takes them again (a configuration reload's new
 * generation takes over from the old one, and a new generation that fails to start gives them back).
 */
export class ChannelHandlers {
  private readonly handlers = new Map<string, ((message: ChannelMessage, reply: Reply) => void)[]>();

  listen(t: string, key: string, handler: (message: ChannelMessage, reply: Reply) => void): () => void {
    const id = `${t}\u0000${key}`;
    const takers = this.handlers.get(id) ?? [];
    takers.push(handler);
    this.handlers.set(id, takers);
    return () => {
      const at = takers.lastIndexOf(handler);
      if (at >= 0) takers.splice(at, 1);
      if (takers.length === 0 && this.handlers.get(id) === takers) this.handlers.delete(id);
    };
  }

  /** Hands `message` to its taker; false when there is none. */
  dispatch(message: ChannelMessage, reply: Reply): boolean {
    const takers = this.handlers.get(`${message.t}\u0000${message.key}`);
    const handler = takers?.[takers.length - 1];
    if (!handler) return false;
    handler(message, reply);
    return true;
  }
}

/** A message as it arrives from the other process, checked before use. */
export function isChannelMessage(m: unknown): m is ChannelMessage {
  if (typeof m !== "object" || m === null) return false;
  const o = m as Record<string, unknown>;
  return typeof o.t === "string" && typeof o.key === "string";
}
