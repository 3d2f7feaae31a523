/**
 * What the fault tests that run `bootseal serve` processes share (kill-9, storm): a temporary
 * directory with the operator's age key, the SeaweedFS buckets they made (removed after the
 * file's tests), and one service configuration per case. Registers its own before/after hooks.
 */
import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before } from "node:test";
import { type AgeKey, ageKey, tempDir } from "../fetcher/helpers.ts";
import { removeS3Bucket, seaweedBucket, seaweedfs } from "../helpers/s3.ts";
import { serviceConfig } from "./helpers.ts";

/** A store for `bootseal serve`: its URL, extra configuration lines and environment. */
export interface ServiceStore {
  readonly store: string;
  readonly extra: readonly string[];
  readonly env: Record<string, string>;
}

export interface FaultsFixture {
  /** The temporary directory (valid once the tests run). */
  readonly dir: string;
  /** The creation rules' age key. */
  readonly operator: AgeKey;
  /** A fresh SeaweedFS bucket as a store, removed after the tests. */
  bucket(name: string, prefix: string): Promise<ServiceStore & { readonly bucket: string }>;
  /** Writes `<label>.yaml` for `sut` with `controllerToken` (admin scopes) and returns its path. */
  writeConfig(
    sut: ServiceStore,
    label: string,
    controllerToken: string,
    uses?: number,
    oneTimeFetch?: "off" | "after-success",
  ): Promise<string>;
  /** The environment a service process gets. */
  env(sut: ServiceStore): Record<string, string | undefined>;
}

export function faultsFixture(name: string): FaultsFixture {
  let dir: { path: string; remove: () => Promise<void> } | undefined;
  let operator: AgeKey | undefined;
  const buckets: string[] = [];
  before(async () => {
    dir = await tempDir(name);
    operator = await ageKey(dir.path, "operator");
  });
  after(async () => {
    for (const b of buckets) await removeS3Bucket(seaweedfs(), b).catch(() => {});
    await dir?.remove();
  });
  const ready = () => {
    if (!dir || !operator) throw new Error(`${name}: the fixture is used before its before() hook ran`);
    return { dir: dir.path, operator };
  };
  return {
    get dir() {
      return ready().dir;
    },
    get operator() {
      return ready().operator;
    },
    async bucket(bucketName, prefix) {
      const made = await seaweedBucket(bucketName, prefix);
      buckets.push(made.bucket);
      return made;
    },
    async writeConfig(sut, label, controllerToken, uses, oneTimeFetch) {
      const { dir: path, operator: key } = ready();
      const file = join(path, `${label}.yaml`);
      const text = serviceConfig({
        store: sut.store,
        extra: sut.extra,
        recipient: key.recipient,
        tokenSha256: createHash("sha256").update(controllerToken).digest("hex"),
        dataDir: join(path, `data-${label}`),
        audit: join(path, `audit-${label}.log`),
        uses,
        ...(oneTimeFetch ? { oneTimeFetch } : {}),
      });
      await writeFile(file, text);
      return file;
    },
    env: (sut) => ({ PATH: process.env.PATH, HOME: ready().dir, AWS_REGION: "us-east-1", ...sut.env }),
  };
}
