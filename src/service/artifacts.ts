/**
 * The fetcher executables the service serves itself (GET /v1/artifacts/…): at start it looks
 * in `artifacts.dir` for the files `npm run build:sea` writes, hashes each once (SHA-256 for
 * the stubs' pin, SHA-512 for Ignition's verification.hash, streamed), and signs each with the
 * service's Ed25519 key (generated on first start, mode 0600, like the age identity). Only the
 * fixed names below are ever opened, so no request can name a path.
 */
import { createHash, createPublicKey } from "node:crypto";
import { chmod, mkdir, open, readFile, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { generateSigningKey, loadPrivateKey, MAX_ARTIFACT_BYTES, signArtifact } from "../artifact/signing.ts";
import { BootsealError } from "../errors.ts";
import { describeBytes } from "../limits.ts";
import { exists, writeSecretFile } from "./embedded-default.ts";

/** The executables by platform, named as `npm run build:sea` writes them. */
export const ARTIFACT_FILES = {
  "linux-x64": "bootseal-linux-x64",
  "linux-arm64": "bootseal-linux-arm64",
  "windows-x64": "bootseal-windows-x64.exe",
} as const;
export type ArtifactPlatform = keyof typeof ARTIFACT_FILES;
export const ARTIFACT_PLATFORMS = Object.keys(ARTIFACT_FILES) as ArtifactPlatform[];

export const SUMS_FILE = "SHA256SUMS";
export const SIGNING_KEY_FILE = "signing-key.pem";

export interface ServedArtifact {
  readonly platform: ArtifactPlatform;
  readonly file: string;
  readonly path: string;
  readonly size: number;
  /** The file as hashed: a later change is noticed before a byte of it is served. */
  readonly mtimeMs: number;
  readonly sha256: string;
  readonly sha512: string;
  /** Raw Ed25519 signature over the file (64 bytes), as `openssl pkeyutl -verify -rawin` reads it. */
  readonly signature: Uint8Array;
}

export interface ArtifactSet {
  readonly dir: string;
  readonly byPlatform: ReadonlyMap<ArtifactPlatform, ServedArtifact>;
  /** SPKI PEM of the signing key; undefined when there is nothing to sign. */
  readonly publicKeyPem: string | undefined;
  /** `sha256sum` lines of the served executables, sorted by name. */
  readonly sums: string;
}

export const EMPTY_ARTIFACTS: ArtifactSet = {
  dir: "",
  byPlatform: new Map(),
  publicKeyPem: undefined,
  sums: "",
};

/**
 * Reads a whole artifact into `buffer` (at least its size long) and answers the bytes read:
 * exactly the size it had when found, so a file that grew or shrank meanwhile is refused
 * instead of being half hashed. One buffer serves every artifact of a load: Ed25519 signs the
 * whole message, and a buffer per file (with a copy of it, as a read into a new Uint8Array
 * makes) kept the start's peak RSS at ~370 MiB for three ~115 MiB executables.
 */
async function readInto(found: FoundArtifact, buffer: Buffer, signal?: AbortSignal): Promise<Buffer> {
  const file = await open(found.path, "r");
  try {
    let filled = 0;
    while (filled < found.size) {
      signal?.throwIfAborted();
      const { bytesRead } = await file.read(buffer, filled, found.size - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    const { bytesRead: more } = await file.read(Buffer.alloc(1), 0, 1, filled);
    if (filled !== found.size || more !== 0) {
      throw new BootsealError(
        "IO_ERROR",
        `the artifact ${found.path} changed while it was read; start again`,
      );
    }
    return buffer.subarray(0, filled);
  } catch (err) {
    if (err instanceof BootsealError || signal?.aborted) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    throw new BootsealError("IO_ERROR", `cannot read the artifact ${found.path} (${code})`, { cause: err });
  } finally {
    await file.close();
  }
}

/**
 * The signing key at `path`, generated (PKCS#8 PEM, mode 0600, its directory 0700) when
 * absent. Replicas that should serve the same signatures share the file.
 */
export async function ensureSigningKey(path: string): Promise<{ privatePem: string; publicPem: string }> {
  try {
    if (!(await exists(path))) {
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      const { privatePem } = generateSigningKey();
      await writeSecretFile(path, privatePem);
    }
    await chmod(path, 0o600);
    const privatePem = await readFile(path, "utf8");
    const key = loadPrivateKey(privatePem, `artifacts.signingKeyFile ${path}`);
    const publicPem = String(createPublicKey(key).export({ type: "spki", format: "pem" }));
    return { privatePem, publicPem };
  } catch (err) {
    if (err instanceof BootsealError) throw err;
    throw new BootsealError("IO_ERROR", `cannot prepare the artifact signing key ${path}`, { cause: err });
  }
}

async function regularFile(path: string): Promise<{ size: number; mtimeMs: number } | null> {
  try {
    const s = await stat(path);
    return s.isFile() ? { size: s.size, mtimeMs: s.mtimeMs } : null;
  } catch {
    return null;
  }
}

/** An executable found in the artifacts directory, not yet hashed. */
export interface FoundArtifact {
  readonly platform: ArtifactPlatform;
  readonly file: string;
  readonly path: string;
  readonly size: number;
  readonly mtimeMs: number;
}

/** The executables present in `dir` (regular files of the fixed names), in platform order. */
export async function findArtifacts(dir: string): Promise<FoundArtifact[]> {
  const found: FoundArtifact[] = [];
  for (const platform of ARTIFACT_PLATFORMS) {
    const file = ARTIFACT_FILES[platform];
    const path = join(dir, file);
    const info = await regularFile(path);
    if (info) found.push({ platform, file, path, ...info });
  }
  return found;
}

/**
 * The executables present in `dir`, hashed and signed. No executable: nothing served and no
 * key generated. The signature needs the whole file (Ed25519 signs the message, not a
 * digest): each file is read once, within the artifact cap, into one buffer the size of the
 * largest, and its digests and signature all come from those same bytes.
 */
export async function loadArtifacts(
  dir: string,
  signingKeyFile: string,
  signal?: AbortSignal,
): Promise<ArtifactSet> {
  const found = await findArtifacts(dir);
  if (found.length === 0) return { ...EMPTY_ARTIFACTS, dir };
  const tooLarge = found.find((f) => f.size > MAX_ARTIFACT_BYTES);
  if (tooLarge) {
    throw new BootsealError(
      "TOO_LARGE",
      `the artifact ${tooLarge.path} is larger than ${describeBytes(MAX_ARTIFACT_BYTES)}`,
    );
  }
  const { privatePem, publicPem } = await ensureSigningKey(signingKeyFile);
  const key = loadPrivateKey(privatePem, signingKeyFile);
  const byPlatform = new Map<ArtifactPlatform, ServedArtifact>();
  const buffer = Buffer.allocUnsafe(Math.max(...found.map((f) => f.size)));
  for (const f of found) {
    const bytes = await readInto(f, buffer, signal);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const sha512 = createHash("sha512").update(bytes).digest("hex");
    byPlatform.set(f.platform, { ...f, sha256, sha512, signature: signArtifact(bytes, key) });
  }
  const sums = [...byPlatform.values()]
    .sort((a, b) => (a.file < b.file ? -1 : 1))
    .map((a) => `${a.sha256}  ${a.file}\n`)
    .join("");
  return { dir, byPlatform, publicKeyPem: publicPem, sums };
}

/** Where the executables are and what signs them (ServiceConfig.artifacts). */
export interface ArtifactSettings {
  readonly dir: string;
  readonly signingKeyFile: string;
}

/** The artifact set of one service, computed once (the first caller starts it) and kept. */
export interface ArtifactCatalog {
  get(): Promise<ArtifactSet>;
  /**
   * For /readyz: resolves once the set is hashed and signed (starting that if nothing has),
   * rejects while it is still being prepared or failed. Until then a balancer sends no machine
   * here: stubs need the pins, and hashing a few hundred megabytes takes the CPU a storm needs.
   */
  ready(): Promise<void>;
  /** Stops a load in flight (app close): a SIGTERM during the start does not wait for it. */
  close(): void;
}

/**
 * Loaded once: the service warms it when it starts listening (routes/artifacts.ts), so an
 * app that only answers injected requests (the tests) hashes nothing it is not asked for. A
 * load that failed (an unreadable key) is tried again by the next caller, not cached.
 */
export function artifactCatalog(settings: ArtifactSettings | undefined): ArtifactCatalog {
  let loading: Promise<ArtifactSet> | undefined;
  const closed = new AbortController();
  let loaded = false;
  const get = () => {
    if (settings === undefined) return Promise.resolve(EMPTY_ARTIFACTS);
    loading ??= loadArtifacts(settings.dir, settings.signingKeyFile, closed.signal).then(
      (set) => {
        loaded = true;
        return set;
      },
      (err: unknown) => {
        loading = undefined;
        throw err;
      },
    );
    return loading;
  };
  return {
    get,
    async ready() {
      if (settings === undefined || loaded) return;
      // Started (or retried after a failure) here; the next probe sees how it went.
      get().catch(() => {});
      throw new BootsealError("SERVICE_UNAVAILABLE", "the fetcher executables are being hashed and signed");
    },
    close: () => closed.abort(),
  };
}

/** The served artifact behind a fixed file name, or undefined. */
export function artifactByFile(set: ArtifactSet, file: string): ServedArtifact | undefined {
  for (const a of set.byPlatform.values()) if (a.file === file) return a;
  return undefined;
}

/**
 * Checks that the file is still the one hashed at start (size and modification time): a
 * rebuild while the service runs would otherwise serve bytes that fail every pin.
 */
export async function checkUnchanged(a: ServedArtifact): Promise<void> {
  const now = await regularFile(a.path);
  if (!now || now.size !== a.size || now.mtimeMs !== a.mtimeMs) {
    throw new BootsealError(
      "STORE_UNAVAILABLE",
      `${a.file} changed since the service started (a new build?): restart the service to hash and sign it again`,
    );
  }
}
