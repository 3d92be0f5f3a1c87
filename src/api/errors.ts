// The one JSON error shape: {"ok": false, "code": "<snake_case>", "message": "<text>"}.

export interface ErrorBody {
  ok: false;
  code: string;
  message: string;
}

/** An error a handler throws to answer with `status` and the JSON error shape. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Extra fields merged into the body (e.g. diagnostics). */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export function errorBody(code: string, message: string): ErrorBody {
  return { ok: false, code, message };
}

/** The response schema every route shares for its error statuses. */
export const errorSchema = {
  type: "object",
  required: ["ok", "code", "message"],
  properties: { ok: { const: false }, code: { type: "string" }, message: { type: "string" } },
  additionalProperties: true,
} as const;
