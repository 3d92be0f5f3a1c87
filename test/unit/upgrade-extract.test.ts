// The unpack's streaming bounds (src/upgrade/extract.ts, run here on the test's own thread): a
// well-formed artefact unpacks; zeros after the end of the tar or inside its files are refused
// within the first megabytes of output, not after inflating a gigabyte; a gzip inside the gzip is
// refused rather than inflated by tar.
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { describe, expect, test } from "vitest";
import { extractBounded, MAX_TRAILING_BYTES, type ExtractJob } from "../../src/upgrade/extract.js";
import { MAX_RATIO } from "../../src/upgrade/unpack.js";
import { fakeRelease, tarGz, zeroBomb } from "../helpers/fake-release.js";

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

  test("files land with their contents and permission bits, parents made where no directory entry names them; a later entry of the same name wins", async () => {
    const j = job(
      tarGz([
        { path: "sluice-9.9.9/", type: "5" },
        { path: "sluice-9.9.9/bin/sluice", content: "#!/bin/sh\n", mode: 0o755 },
        { path: "sluice-9.9.9/a/b/c/deep.txt", content: "deep" },
        { path: "sluice-9.9.9/empty", content: "" },
        { path: "sluice-9.9.9/twice", content: "first" },
        { path: "sluice-9.9.9/twice", content: "second", mode: 0o600 },
        { path: "sluice-9.9.9/big", content: Buffer.alloc(300_000, 7) },
      ]),
    );
    expect(await extractBounded(j)).toMatchObject({ ok: true, entries: 7 });
    expect(readFileSync(join(j.dir, "bin", "sluice"), "utf8")).toBe("#!/bin/sh\n");
    expect(statSync(join(j.dir, "bin", "sluice")).mode & 0o777).toBe(0o755);
    expect(readFileSync(join(j.dir, "a", "b", "c", "deep.txt"), "utf8")).toBe("deep");
    expect(statSync(join(j.dir, "empty")).size).toBe(0);
    expect(readFileSync(join(j.dir, "twice"), "utf8")).toBe("second");
    expect(readFileSync(join(j.dir, "big")).equals(Buffer.alloc(300_000, 7))).toBe(true);
  });

  test("a directory where a file was written (or the other way round) fails the unpack, saying why", async () => {
    const dirOverFile = await extractBounded(job(tarGz([{ path: "sluice-9.9.9/x", content: "file" }, { path: "sluice-9.9.9/x/", type: "5" }])));
    expect(dirOverFile).toMatchObject({ ok: false, error: expect.stringMatching(/^the artefact cannot be unpacked: EEXIST/) as unknown });
    const fileOverDir = await extractBounded(job(tarGz([{ path: "sluice-9.9.9/y/", type: "5" }, { path: "sluice-9.9.9/y", content: "file" }])));
    expect(fileOverDir).toMatchObject({ ok: false, error: expect.stringMatching(/^the artefact cannot be unpacked: EISDIR/) as unknown });
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
