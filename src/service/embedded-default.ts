/**
 * The embedded default (docs/configuration.md): with no config file the service keeps everything under
 * one data directory. On first start it generates an age identity (its recipient is the one
 * creation rule), a controller token with every scope and the bootstrap-token derivation key
 * (stable user-data stubs: tokens.ts deriveToken), all files mode 0600. Later starts reuse
 * them. The service keeps only the controller token's SHA-256 in memory.
 */
import { createHash, randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { access, chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { BootsealError } from "../errors.ts";

export interface EmbeddedDefault {
  readonly dataDir: string;
  readonly storeDir: string;
  readonly storeUrl: string;
  readonly ageKeyFile: string;
  readonly ageRecipient: string;
  readonly controllerTokenFile: string;
  /** SHA-256 of the controller token, hex; the token itself is not kept. */
  readonly controllerTokenSha256: string;
  /** bootstrapToken.derivationKeyFile */
  readonly derivationKeyFile: string;
}

/** Write a secret file, refusing to leave it readable by others even if it existed before. */
export async function writeSecretFile(path: string, content: string): Promise<void> {
  await writeFile(path, content, { mode: 0o600, flag: "wx" });
  await chmod(path, 0o600);
}

export async function exists(path: string): Promise<boolean> {
  try {
    await access(path, constants.F_OK);
    return true;
  } catch {
    return false;
  }
}

async function ensureAgeIdentity(path: string): Promise<string> {
  if (!(await exists(path))) {
    const identity = await generateX25519Identity();
    const recipient = await identityToRecipient(identity);
    const created = new Date().toISOString();
    await writeSecretFile(path, `# created: ${created}\n# public key: ${recipient}\n${identity}\n`);
  }
  await chmod(path, 0o600);
  const text = await readFile(path, "utf8");
  const identity = text.split("\n").find((line) => line.startsWith("AGE-SECRET-KEY-"));
  if (!identity) throw new BootsealError("BAD_INPUT", `${path} holds no age identity`);
  return identityToRecipient(identity);
}

async function ensureControllerToken(path: string): Promise<string> {
  if (!(await exists(path))) {
    // 256 random bits, base64url: the same strength as a bootstrap token.
    await writeSecretFile(path, `${randomBytes(32).toString("base64url")}\n`);
  }
  await chmod(path, 0o600);
  const token = (await readFile(path, "utf8")).trim();
  if (token.length < 32) throw new BootsealError("BAD_INPUT", `${path} holds no usable token`);
  return createHash("sha256").update(token).digest("hex");
}

async function ensureDerivationKey(path: string): Promise<void> {
  // 256 random bits as base64url text: copyable between replicas like the age identity.
  if (!(await exists(path))) await writeSecretFile(path, `${randomBytes(32).toString("base64url")}\n`);
  await chmod(path, 0o600);
}

/**
 * `file://` and the directory, percent-encoded as a file URL path (`/tmp/a%20b/data/store`):
 * a store URL has no spaces, and the file store decodes the escapes.
 */
export function fileStoreUrl(dir: string): string {
  return `file://${pathToFileURL(dir).pathname}`;
}

export async function prepareEmbeddedDefault(dataDirArg: string): Promise<EmbeddedDefault> {
  const dataDir = resolve(dataDirArg);
  const storeDir = join(dataDir, "store");
  const keysDir = join(dataDir, "keys");
  try {
    await mkdir(storeDir, { recursive: true, mode: 0o700 });
    await mkdir(keysDir, { recursive: true, mode: 0o700 });
    await chmod(keysDir, 0o700);
  } catch (cause) {
    throw new BootsealError("IO_ERROR", `cannot create the data directory ${dataDir}`, { cause });
  }
  const ageKeyFile = join(keysDir, "age.txt");
  const controllerTokenFile = join(keysDir, "controller-token");
  const ageRecipient = await ensureAgeIdentity(ageKeyFile);
  const controllerTokenSha256 = await ensureControllerToken(controllerTokenFile);
  const derivationKeyFile = join(keysDir, "bootstrap-token-derivation.key");
  await ensureDerivationKey(derivationKeyFile);
  return {
    dataDir,
    storeDir,
    storeUrl: fileStoreUrl(storeDir),
    ageKeyFile,
    ageRecipient,
    controllerTokenFile,
    controllerTokenSha256,
    derivationKeyFile,
  };
}
