/**
 * rotate FILE (sops rotate): decrypt (MAC checked), add the --add-* keys to the first group,
 * drop every key whose identity equals an --rm-* key, then a NEW data key re-encrypts every
 * value and the MAC. Keys that stay keep their created_at; version is unchanged.
 *
 * rotate --store URL: the same for every object under --prefix (default configs/), each
 * verified and replaced with a conditional write (../rotate-store.ts; docs/cli.md "Rotating a
 * whole store").
 */
import { parseArgs } from "node:util";
import type { ProviderDeps } from "../../../providers/keys/index.ts";
import { openStore } from "../../../providers/stores/index.ts";
import { BootsealError } from "../../errors.ts";
import { MACHINE_CONTEXT_KEY } from "../../fetcher/decrypt-payload.ts";
import type { CliIo, Command } from "../command.ts";
import { EXIT_CODES, EXIT_OK } from "../exit-codes.ts";
import { readInput, writeOutput } from "../file-io.ts";
import { keyFlagOptions, parseEncryptionContext } from "../key-flags.ts";
import { keysFromFlags } from "../key-setup.ts";
import { type KeyChanges, rotateDocument } from "../rotate-document.ts";
import { rotateStore } from "../rotate-store.ts";
import { FORMAT_OPTIONS, parseDecryptionOrder, pickFormats, providerDeps } from "../sops-file.ts";

const FILE_ONLY = ["output", "in-place", "ignore-mac", ...Object.keys(FORMAT_OPTIONS)] as const;
const STORE_ONLY = ["prefix", "concurrency", "dry-run"] as const;
const DEFAULT_PREFIX = "configs/";
const DEFAULT_CONCURRENCY = 4;
const MAX_CONCURRENCY = 64;
/** `configs/<ns>/<name>` (relative to the store URL's prefix), as the service lays it out. */
const MACHINE_OBJECT = /^configs\/([^/]+)\/([^/]+)$/;

type Values = Record<string, string | boolean | undefined>;

function keyChanges(values: Values, deps: ProviderDeps, env: CliIo["env"]): KeyChanges {
  return {
    add: keysFromFlags(values, deps, env, "add-"),
    remove: new Set(keysFromFlags(values, deps, env, "rm-").map((k) => k.id)),
  };
}

/**
 * Key changes per object. AWS KMS keys added to `configs/<ns>/<name>` get the encryption
 * context {"bootseal-machine": "<ns>/<name>"} merged in, as the service binds them when it
 * publishes (design principle 3); --rm-kms removes the bound and the unbound entry.
 */
function changesPerObject(
  values: Values,
  deps: ProviderDeps,
  env: CliIo["env"],
): (key: string) => KeyChanges {
  const base = keyChanges(values, deps, env);
  if (typeof values["add-kms"] !== "string" && typeof values["rm-kms"] !== "string") return () => base;
  const context = parseEncryptionContext(values["encryption-context"] as string | undefined) ?? {};
  return (key) => {
    const m = MACHINE_OBJECT.exec(key);
    if (!m) return base;
    const bound = { ...context, [MACHINE_CONTEXT_KEY]: `${m[1]}/${m[2]}` };
    const text = Object.entries(bound)
      .map(([k, v]) => `${k}:${v}`)
      .join(",");
    const changes = keyChanges({ ...values, "encryption-context": text }, deps, env);
    return { add: changes.add, remove: new Set([...base.remove, ...changes.remove]) };
  };
}

function parseConcurrency(text: string | undefined): number {
  if (text === undefined) return DEFAULT_CONCURRENCY;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > MAX_CONCURRENCY) {
    throw new BootsealError("USAGE", `--concurrency wants a whole number from 1 to ${MAX_CONCURRENCY}`);
  }
  return n;
}

async function runStore(values: Values, positionals: string[], io: CliIo): Promise<number> {
  if (positionals.length !== 0) throw new BootsealError("USAGE", "rotate --store takes no FILE");
  for (const flag of FILE_ONLY) {
    if (values[flag] !== undefined)
      throw new BootsealError("USAGE", `--${flag} does not apply to rotate --store`);
  }
  const url = values.store as string;
  if (url.trim() === "") throw new BootsealError("USAGE", "--store wants a URL (file://, s3://, gs://)");
  const deps = providerDeps(io.env);
  const order = parseDecryptionOrder(
    (values["decryption-order"] as string | undefined) ?? io.env.SOPS_DECRYPTION_ORDER,
  );
  const changesFor = changesPerObject(values, deps, io.env);
  const concurrency = parseConcurrency(values.concurrency as string | undefined);
  const dryRun = values["dry-run"] === true;
  const store = openStore(url, { cwd: io.cwd, env: io.env });
  const result = await rotateStore({
    store,
    prefix: (values.prefix as string | undefined) ?? DEFAULT_PREFIX,
    changesFor,
    concurrency,
    dryRun,
    deps,
    ...(order ? { order } : {}),
    report: (line) => io.stdout.write(`${line}\n`),
  });
  const counts = `unchanged ${result.unchanged}, skipped ${result.skipped}, failed ${result.failed}`;
  io.stdout.write(
    dryRun
      ? `would rotate ${result.rotated}, ${counts} (dry run: nothing written)\n`
      : `rotated ${result.rotated}, ${counts}\n`,
  );
  if (result.firstFailure !== undefined) {
    io.stderr.write(`bootseal: rotate: ${result.failed} object(s) failed and were left unchanged\n`);
    return EXIT_CODES[result.firstFailure];
  }
  if (result.skipped > 0) {
    io.stderr.write(`bootseal: rotate: ${result.skipped} object(s) skipped; run rotate again for them\n`);
    return EXIT_CODES.PRECONDITION_FAILED;
  }
  return EXIT_OK;
}

async function runFile(values: Values, positionals: string[], io: CliIo): Promise<number> {
  for (const flag of STORE_ONLY) {
    if (values[flag] !== undefined) throw new BootsealError("USAGE", `--${flag} needs --store`);
  }
  if (positionals.length !== 1) throw new BootsealError("USAGE", "rotate takes one file (or --store URL)");
  const file = positionals[0] as string;
  const deps = providerDeps(io.env);
  const formats = pickFormats(file, values as Record<string, string | undefined>);
  const bytes = await readInput(file, io);
  const order = parseDecryptionOrder(
    (values["decryption-order"] as string | undefined) ?? io.env.SOPS_DECRYPTION_ORDER,
  );
  const rotated = await rotateDocument(bytes, formats, keyChanges(values, deps, io.env), {
    deps,
    ...(order ? { order } : {}),
    ignoreMac: values["ignore-mac"] === true,
  });
  await writeOutput(
    rotated.bytes,
    {
      inPlace: values["in-place"] as boolean | undefined,
      output: values.output as string | undefined,
      inputFile: file,
    },
    io,
  );
  return EXIT_OK;
}

export const rotateCommand: Command = {
  name: "rotate",
  summary:
    "give a document (or every document in a store) a new data key, optionally adding or removing master keys",
  usage:
    "bootseal rotate [--add-age R] [--rm-pgp FP] [--add-kms ARN] ... [-i | --output FILE] FILE\n" +
    "       bootseal rotate --store URL [--prefix P] [--add-* KEY] [--rm-* KEY] [--concurrency N] [--dry-run]",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        ...keyFlagOptions("add-rm"),
        ...FORMAT_OPTIONS,
        "encryption-context": { type: "string" },
        "aws-profile": { type: "string" },
        "ignore-mac": { type: "boolean" },
        "decryption-order": { type: "string" },
        output: { type: "string" },
        "in-place": { type: "boolean", short: "i" },
        store: { type: "string" },
        prefix: { type: "string" },
        concurrency: { type: "string" },
        "dry-run": { type: "boolean" },
      },
    });
    const v = values as Values;
    return v.store !== undefined ? runStore(v, positionals, io) : runFile(v, positionals, io);
  },
};
