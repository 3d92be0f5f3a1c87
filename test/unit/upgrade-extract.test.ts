// The unpack's streaming bounds (src/upgrade/extract.ts, run here on the test's own thread): a
// well-formed artefact unpacks; zeros after the end of the tar or inside its files are refused
// within the first megabytes of output, not after inflating a gigabyte; a gzip inside the gzip is
// refused rather than inflated by tar.
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { describe, expect, test } from "vitest";
import { extractBounded, MAX_TRAILING_BYTES, type ExtractJob } from "../../src/upgrade/extract.js";
import { MAX_RATIO } from "../../src/upgrade/unpack.js";
import { fakeRelease, zeroBomb } from "../helpers/fake-release.js";

const MiB = 1024 * 1024;

function job(body: Buffer, overrides: Partial<ExtractJob> = {}): ExtractJob {
  const dir = mkdtempSync(join(tmpdir(), "sluice-extract-"));
  writeFileSync(join(dir, "a.tar.gz"), body);
  const out = join(dir, "out");
  return { file: join(dir, "a.tar.gz"), dir: mkdtempSync(out), root: "sluice-9.9.9", maxBytes: 1024 * MiB, maxRatio: MAX_RATIO, maxEntries: 1000, ...overrides };
}

describe("extractBounded", () => {
  test("a well-formed artefact unpacks, also with a tar record's padding after its end", async () => {
    const plain = job(fakeRelease("9.9.9").body);
    expect(await extractBounded(plain)).toMatchObject({ ok: true, entries: 7 });
    expect(readdirSync(plain.dir).sort()).toEqual(["bin", "dist", "sluice-release.json"]);
    const padded = job(Buffer.concat([fakeRelease("9.9.9").body, gzipSync(Buffer.alloc(10240))]));
    expect(await extractBounded(padded)).toMatchObject({ ok: true });
  });

  for (const where of ["trailing", "entries"] as const) {
    test(`1 GiB of zeros (${where}) is refused within moments`, async () => {
      const bomb = zeroBomb("9.9.9", 1024 * MiB, where);
      const started = performance.now();
      const outcome = await extractBounded(job(bomb.body));
      const ms = performance.now() - started;
      expect(outcome.ok).toBe(false);
      expect(outcome.ok ? "" : outcome.error).toMatch(where === "trailing" ? /the artefact was refused: (more than \d+ bytes follow the end of the tar archive|it expands more than 200 times)/ : /the artefact was refused: it expands more than 200 times .* a decompression bomb/);
      expect(ms).toBeLessThan(5_000);
    });
  }

  test("zeros after the end are refused past MAX_TRAILING_BYTES even when the ratio is allowed", async () => {
    const outcome = await extractBounded(job(zeroBomb("9.9.9", 64 * MiB, "trailing").body, { maxRatio: 1e9 }));
    expect(outcome).toEqual({ ok: false, error: `the artefact was refused: more than ${MAX_TRAILING_BYTES} bytes follow the end of the tar archive` });
  });

  test("the unpacked size is bounded by what headers declare, and by the stream itself", async () => {
    const declared = await extractBounded(job(zeroBomb("9.9.9", 64 * MiB, "entries").body, { maxRatio: 1e9, maxBytes: 4 * MiB }));
    expect(declared).toEqual({ ok: false, error: "the artefact was refused: its files declare more than 4194304 bytes (4 × upgrade.max_download_bytes)" });
    // Bytes no header declares (here after the end, below the trailing allowance) count as well.
    const streamed = await extractBounded(job(zeroBomb("9.9.9", 64 * MiB, "trailing").body, { maxRatio: 1e9, maxBytes: 512 * 1024 }));
    expect(streamed).toEqual({ ok: false, error: "the artefact was refused: more than 524288 bytes unpacked (4 × upgrade.max_download_bytes)" });
  });

  test("a gzip inside the gzip is refused, not inflated by tar", async () => {
    const outcome = await extractBounded(job(gzipSync(fakeRelease("9.9.9").body)));
    expect(outcome).toEqual({ ok: false, error: "the artefact was refused: the artefact is compressed twice (a gzip or zstd stream inside the gzip)" });
  });
});
