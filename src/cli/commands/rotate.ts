/**
 * rotate FILE (sops rotate): decrypt (MAC checked), add the --add-* keys to the first group,
 * drop every key whose identity equals an --rm-* key, then a NEW data key re-encrypts every
 * value and the MAC. Keys that stay keep their created_at; version is unchanged.
 *
 * rotate --store URL: the same for every object under --prefix (default configs/), each
 * verified and replaced with a conditional write (../rotate-store.ts; docs/cli.md "Rotating a
 * whole store").
 *
 * rotate --recursive -i DIR: the same for every sops document under a directory, in place,
 * in one run (../directory-run.ts).
 */
import { resolve } from "node:path";
import type { ProviderDeps } from "../../../providers/keys/index.ts";
import { openStore, STORE_SCHEMES, storeUrlExamples } from "../../../providers/stores/index.ts";
import { BootsealError } from "../../errors.ts";
import { bindContext } from "../../machine/kms-binding.ts";
import { CONFIGS_PREFIX, configKeyMachineText } from "../../machine/store-layout.ts";
import type { CliIo, Command } from "../command.ts";
import { DIRECTORY_CONCURRENCY, runOverDirectory } from "../directory-run.ts";
import { EXIT_CODES, EXIT_OK } from "../exit-codes.ts";
import { checkTarget, exists, readInput, writeOutput } from "../file-io.ts";
import { FORMAT_FLAGS, JSON_FLAG, KEYSERVICE_FLAGS, OUTPUT_FLAGS } from "../flag-groups.ts";
import { type CommandSpec, type Flag, parseFlags } from "../flags.ts";
import { DECRYPTION_ORDER_FLAG, KMS_FLAGS, keyFlags, parseEncryptionContext } from "../key-flags.ts";
import { keyServicesOf, keysFromFlags } from "../key-setup.ts";
import { Progress } from "../progress.ts";
import { type KeyChanges, rotateDocument } from "../rotate-document.ts";
import { rotateStore } from "../rotate-store.ts";
import { parseDecryptionOrder, pickFormats, providerDeps } from "../sops-file.ts";

const DEFAULT_PREFIX = CONFIGS_PREFIX;
const DEFAULT_CONCURRENCY = 4;
const MAX_CONCURRENCY = 64;

type Values = Record<string, string | boolean | string[] | undefined>;

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
    // Keys are relative to the store URL's prefix: the layout starts the key.
    const machine = configKeyMachineText(key);
    if (!machine) return base;
    const bound = bindContext(context, machine);
    const text = Object.entries(bound)
      .map(([k, v]) => `${k}:${v}`)
      .join(",");
    const changes = keyChanges({ ...values, "encryption-context": text }, deps, env);
    return { add: changes.add, remove: new Set([...base.remove, ...changes.remove]) };
  };
}

function parseConcurrency(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > MAX_CONCURRENCY) {
    throw new BootsealError("USAGE", `--concurrency wants a whole number from 1 to ${MAX_CONCURRENCY}`);
  }
  return n;
}

async function runStore(
  values: Values,
  positionals: string[],
  given: ReadonlySet<string>,
  io: CliIo,
): Promise<number> {
  if (positionals.length !== 0) throw new BootsealError("USAGE", "rotate --store takes no FILE");
  for (const flag of FILE_ONLY) {
    if (given.has(flag)) throw new BootsealError("USAGE", `--${flag} does not apply to rotate --store`);
  }
  const url = values.store as string;
  if (url.trim() === "") {
    const schemes = STORE_SCHEMES.map((s) => `${s.scheme}://`).join(", ");
    throw new BootsealError("USAGE", `--store wants a URL (${schemes})`);
  }
  const deps = providerDeps(io.env);
  const order = parseDecryptionOrder(values["decryption-order"] as string | undefined);
  const changesFor = changesPerObject(values, deps, io.env);
  const concurrency = parseConcurrency(values.concurrency as string);
  const dryRun = values["dry-run"] === true;
  const store = openStore(url, { cwd: io.cwd, env: io.env });
  const json = values.json === true;
  // On a terminal: a progress bar on stderr, and only the objects that did not rotate as lines.
  const tty = !json && (io.stderr as { isTTY?: boolean }).isTTY === true;
  let progress: Progress | undefined;
  const line = (text: string) => {
    if (json) return;
    if (!tty) io.stdout.write(`${text}\n`);
    else if (!text.startsWith("rotated ") && !text.startsWith("would rotate ")) {
      if ((io.stdout as { isTTY?: boolean }).isTTY === true && progress) progress.note(text);
      else io.stdout.write(`${text}\n`);
    }
  };
  const result = await rotateStore({
    store,
    prefix: values.prefix as string,
    changesFor,
    concurrency,
    dryRun,
    deps,
    order,
    keyServices: keyServicesOf(values),
    report: line,
    onListed: (total) => {
      if (json) io.stdout.write(`${JSON.stringify({ type: "start", total, dryRun })}\n`);
      else if (tty) progress = new Progress({ total, stream: io.stderr });
    },
    onOutcome: (key, outcome) => {
      progress?.tick();
      if (!json) return;
      const kind = outcome.kind === "rotated" && dryRun ? "would-rotate" : outcome.kind;
      io.stdout.write(
        `${JSON.stringify({
          type: "object",
          key,
          outcome: kind,
          ...(outcome.kind === "failed" ? { code: outcome.code } : {}),
          ...(outcome.kind === "skipped" ? { reason: outcome.reason } : {}),
        })}\n`,
      );
    },
  });
  progress?.finish();
  const exit =
    result.firstFailure !== undefined
      ? EXIT_CODES[result.firstFailure]
      : result.skipped > 0
        ? EXIT_CODES.PRECONDITION_FAILED
        : EXIT_OK;
  if (json) {
    const { firstFailure, ...counts } = result;
    io.stdout.write(
      `${JSON.stringify({ type: "summary", ...counts, dryRun, ...(firstFailure ? { firstFailure } : {}), exit })}\n`,
    );
    return exit;
  }
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

async function runFile(
  values: Values,
  positionals: string[],
  given: ReadonlySet<string>,
  io: CliIo,
): Promise<number> {
  for (const flag of STORE_ONLY) {
    if (given.has(flag)) throw new BootsealError("USAGE", `--${flag} needs --store`);
  }
  if (positionals.length === 0) throw new BootsealError("NO_FILE", "no file specified (or --store URL)");
  if (positionals.length !== 1) throw new BootsealError("USAGE", "rotate takes one file (or --store URL)");
  const file = positionals[0] as string;
  if (values.recursive === true) return runDirectory(values, file, io);
  const target = {
    inPlace: values["in-place"] as boolean | undefined,
    output: values.output as string | undefined,
    inputFile: file,
  };
  checkTarget(target);
  const changesKeys = [...given].some((f) => f.startsWith("add-") || f.startsWith("rm-"));
  if (changesKeys && !(await exists(file))) {
    throw new BootsealError(
      "KEYS_ON_MISSING_FILE",
      `cannot add or remove keys on non-existent file "${resolve(io.cwd, file)}"`,
    );
  }
  const deps = providerDeps(io.env);
  const formats = pickFormats(file, values as Record<string, string | undefined>);
  const bytes = await readInput(file, io);
  const order = parseDecryptionOrder(values["decryption-order"] as string | undefined);
  const rotated = await rotateDocument(bytes, formats, keyChanges(values, deps, io.env), {
    deps,
    order,
    ignoreMac: values["ignore-mac"] === true,
    keyServices: keyServicesOf(values),
  });
  await writeOutput(rotated.bytes, target, io);
  return EXIT_OK;
}

/** Every sops document under `dir`, each in place with a new data key and the same key changes. */
async function runDirectory(values: Values, dir: string, io: CliIo): Promise<number> {
  if (values["in-place"] !== true || values.output !== undefined)
    throw new BootsealError(
      "USAGE",
      "rotate --recursive rewrites each file: give -i (--in-place), not --output",
    );
  const deps = providerDeps(io.env);
  const changes = keyChanges(values, deps, io.env);
  const options = {
    deps,
    order: parseDecryptionOrder(values["decryption-order"] as string | undefined),
    ignoreMac: values["ignore-mac"] === true,
    keyServices: keyServicesOf(values),
  };
  const words = { command: "rotate", changed: "rotated", unchanged: "unchanged" };
  return runOverDirectory(
    dir,
    io,
    words,
    async (path, bytes, replace) => {
      const formats = pickFormats(path, values as Record<string, string | undefined>);
      const rotated = await rotateDocument(bytes, formats, changes, options);
      await replace(path, rotated.bytes);
      return { kind: "changed" };
    },
    DIRECTORY_CONCURRENCY,
  );
}

const STORE_FLAGS = [
  {
    name: "store",
    type: "string",
    value: "URL",
    help: `rotate every document in this store (${storeUrlExamples().join(", ")})`,
  },
  {
    name: "prefix",
    type: "string",
    value: "P",
    default: DEFAULT_PREFIX,
    help: "with --store: the objects under this prefix, relative to the store URL's own",
  },
  {
    name: "concurrency",
    type: "string",
    value: "N",
    default: String(DEFAULT_CONCURRENCY),
    help: `with --store: objects rotated at once (1 to ${MAX_CONCURRENCY})`,
  },
  { name: "dry-run", type: "boolean", help: "with --store: verify every object, write nothing" },
  {
    ...JSON_FLAG,
    help: 'with --store: JSON lines on standard output: {"type":"start","total":N}, one {"type":"object","key","outcome","code"} per object, a {"type":"summary"}',
  },
] as const satisfies readonly Flag[];

const spec = {
  name: "rotate",
  summary:
    "give a document (or every document in a store) a new data key; --add-*/--rm-* change its master keys",
  operands: "FILE",
  forms: ["--store URL [flags]", "--recursive -i DIR [flags]"],
  flags: [
    ...OUTPUT_FLAGS,
    {
      name: "recursive",
      type: "boolean",
      help: "DIR is a directory: rotate every sops document under it in place (-i), in one run, with a summary",
    },
    ...FORMAT_FLAGS,
    ...KMS_FLAGS,
    ...keyFlags("add"),
    ...keyFlags("rm"),
    { name: "ignore-mac", type: "boolean", help: "do not check the MAC of the document before rotating" },
    DECRYPTION_ORDER_FLAG,
    ...KEYSERVICE_FLAGS,
    ...STORE_FLAGS,
  ],
} as const satisfies CommandSpec;

/** Flags that make sense for one FILE only, refused with --store. */
const FILE_ONLY = ["ignore-mac", "recursive", ...[...OUTPUT_FLAGS, ...FORMAT_FLAGS].map((f) => f.name)];
const STORE_ONLY = STORE_FLAGS.filter((f) => f.name !== "store").map((f) => f.name);

export const rotateCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals, given } = parseFlags(spec, args, io.env);
    const v = values as Values;
    return v.store !== undefined ? runStore(v, positionals, given, io) : runFile(v, positionals, given, io);
  },
};
