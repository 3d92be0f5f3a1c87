// The API's answer shapes, derived on the server from the route response schemas (src/api/shapes.ts):
// types only, so nothing of the server is bundled, and a schema change that breaks a page fails the typecheck.

export type * from "../../src/api/shapes";
