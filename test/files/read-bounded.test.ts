import assert from "node:assert/strict";
import { mkdtemp, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import test from "node:test";
import { readFileBounded, readStreamBounded } from "../../src/files/read-bounded.ts";
import { MAX_DOCUMENT_BYTES } from "../../src/limits.ts";

test("readFileBounded: the bytes of a regular file; the cap is checked before reading", async () => {
  const dir = await mkdtemp(join(tmpdir(), "bootseal-read-"));
  try {
    const small = join(dir, "small");
    await writeFile(small, "abc");
    assert.deepEqual(await readFileBounded(small), new Uint8Array([0x61, 0x62, 0x63]));
    await assert.rejects(readFileBounded(small, { maxBytes: 2 }), {
      code: "TOO_LARGE",
      message: `${small} is larger than 2 bytes`,
    });
    // A sparse file one byte over the cap: refused by its size, without reading 64 MiB.
    const big = join(dir, "big");
    await writeFile(big, "");
    await truncate(big, MAX_DOCUMENT_BYTES + 1);
    await assert.rejects(readFileBounded(big), {
      code: "TOO_LARGE",
      message: `${big} is larger than 64 MiB`,
    });
    await assert.rejects(readFileBounded(dir), {
      code: "BAD_INPUT",
      message: `${dir} is not a regular file`,
    });
    await assert.rejects(readFileBounded(join(dir, "missing")), {
      code: "BAD_INPUT",
      message: /no such file/,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("readStreamBounded: stops with TOO_LARGE as soon as the stream passes the cap", async () => {
  const chunks = [Buffer.from("ab"), "cd", Buffer.from("e")];
  assert.deepEqual(Buffer.from(await readStreamBounded(Readable.from(chunks), "stdin")).toString(), "abcde");
  let pulled = 0;
  async function* endless(): AsyncGenerator<Buffer> {
    for (;;) {
      pulled++;
      yield Buffer.alloc(1024);
    }
  }
  await assert.rejects(readStreamBounded(endless(), "standard input", { maxBytes: 4096 }), {
    code: "TOO_LARGE",
    message: "standard input is larger than 4 KiB",
  });
  assert.equal(pulled, 5, "reading stopped at the first chunk over the cap");
});
