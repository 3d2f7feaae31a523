/**
 * The SEA blob and the executables. One blob for every platform: no code cache and no
 * startup snapshot, the two parts of a blob that are V8 heap data of one platform (and that
 * differ from one build to the next: the cause of the earlier non-reproducible builds). The
 * main script is the loader (./loader.ts), the bundle an asset it compiles with a code cache
 * made at run time. The blob records paths as given in its config, so the config is written
 * with fixed relative paths in a scratch directory and `node --experimental-sea-config` runs there.
 * postject then injects the blob into a copy of each official Node binary (less what
 * ./base-prep.ts takes off) and flips the fuse.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { prepareBase } from "./base-prep.ts";
import { loaderSource } from "./loader.ts";

const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

export async function makeBlob(nodeBinary: string, code: Uint8Array, scratch: string): Promise<Uint8Array> {
  await writeFile(join(scratch, "bootseal.cjs"), code);
  await writeFile(join(scratch, "loader.cjs"), loaderSource(createHash("sha256").update(code).digest("hex")));
  await writeFile(
    join(scratch, "sea-config.json"),
    JSON.stringify({
      main: "loader.cjs",
      output: "bootseal.blob",
      disableExperimentalSEAWarning: true,
      useCodeCache: false,
      useSnapshot: false,
      assets: { "bootseal.cjs": "bootseal.cjs" },
    }),
  );
  execFileSync(nodeBinary, ["--experimental-sea-config", "sea-config.json"], {
    cwd: scratch,
    stdio: ["ignore", "ignore", "inherit"],
  });
  return readFile(join(scratch, "bootseal.blob"));
}

type Inject = (file: string, name: string, data: Buffer, options: { sentinelFuse: string }) => Promise<void>;

export async function injectBlob(base: string, blob: Uint8Array, out: string): Promise<void> {
  await writeFile(out, prepareBase(await readFile(base)));
  await chmod(out, 0o755);
  const { inject } = createRequire(import.meta.url)("postject") as { inject: Inject };
  await inject(out, "NODE_SEA_BLOB", Buffer.from(blob), { sentinelFuse: SEA_FUSE });
}
