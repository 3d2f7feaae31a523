/**
 * edit FILE (sops edit, and the bare `bootseal FILE`): decrypt into a private temporary file,
 * run the editor (../edit-session.ts), and when the content changed and parses, encrypt it
 * again under the SAME data key (../reseal.ts) and replace FILE. A FILE that does not exist
 * starts from sops's example document and gets its keys from the key flags or the
 * `.sops.yaml` creation rule, as `encrypt` would.
 */
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { KEY_KINDS } from "../../../providers/keys/index.ts";
import type { Codec, Format } from "../../envelope/sops/codecs/codec.ts";
import { codecFor } from "../../envelope/sops/codecs/index.ts";
import type { Branch, Mapping, Value } from "../../envelope/sops/document.ts";
import { SOPS_VERSION } from "../../envelope/sops/encrypt.ts";
import { wrapDataKey } from "../../envelope/sops/key-groups.ts";
import {
  DEFAULT_RULE,
  formatLastModified,
  type Metadata,
  metadataFromTree,
  metadataToTree,
} from "../../envelope/sops/metadata.ts";
import { BootsealError, hasCode, isBootsealError } from "../../errors.ts";
import { replaceFile } from "../../files/atomic-write.ts";
import { readFileBounded } from "../../files/read-bounded.ts";
import type { CliIo, Command } from "../command.ts";
import { editUntilValid } from "../edit-session.ts";
import { exists } from "../file-io.ts";
import {
  IGNORE_MAC_FLAG,
  INPUT_TYPE_FLAG,
  KEYSERVICE_FLAGS,
  OUTPUT_TYPE_FLAG,
  SOPS_CONFIG_FLAG,
  THRESHOLD_FLAG,
} from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { DECRYPTION_ORDER_FLAG, KMS_FLAGS, keyFlags, ruleFlags } from "../key-flags.ts";
import { keyResolver, keySetup } from "../key-setup.ts";
import { closeDocument, openDocument, reseal } from "../reseal.ts";
import { parseDecryptionOrder, pickFormats, providerDeps } from "../sops-file.ts";
import { verbose } from "../verbose.ts";

export const EDIT_FLAGS = [
  ...keyFlags("set"),
  ...KMS_FLAGS,
  INPUT_TYPE_FLAG,
  OUTPUT_TYPE_FLAG,
  ...ruleFlags(),
  {
    name: "mac-only-encrypted",
    type: "boolean",
    help: "a new file: compute the MAC over the encrypted values only",
  },
  THRESHOLD_FLAG,
  SOPS_CONFIG_FLAG,
  ...KEYSERVICE_FLAGS,
  {
    name: "show-master-keys",
    short: "s",
    type: "boolean",
    help: "show the sops metadata (master keys) in the file being edited",
  },
  IGNORE_MAC_FLAG,
  DECRYPTION_ORDER_FLAG,
] as const;

const spec = {
  name: "edit",
  summary: "edit an encrypted file in $SOPS_EDITOR or $EDITOR; a new FILE is created encrypted",
  operands: "FILE",
  flags: EDIT_FLAGS,
  notes: [
    "The key flags and selection flags apply to a new FILE only; an existing one keeps its keys and data key.",
    "Exits without writing when the content did not change.",
  ],
} as const satisfies CommandSpec;

const str = (value: string): Value => ({ kind: "scalar", type: "str", value });
const WELCOME = "Welcome to SOPS! Edit this file as you please!";

/** sops's EmitExample per store (stores/stores.go Example*Tree; the binary store's text). */
function exampleBranch(format: Format): Mapping {
  if (format === "binary")
    return { kind: "map", items: [{ kind: "entry", key: "data", value: str(WELCOME) }] };
  const entry = (key: string, value: Value) => ({ kind: "entry" as const, key, value });
  const comment = (text: string) => ({ kind: "comment" as const, text });
  if (format === "dotenv") {
    return {
      kind: "map",
      items: [
        comment(" This is an example file."),
        entry("hello", str(WELCOME)),
        entry("example_key", str("example_value")),
        entry("example_multiline", str("foo\nbar\nbaz")),
      ],
    };
  }
  if (format === "ini") {
    const section: Mapping = {
      kind: "map",
      items: [
        comment(" This is an example file."),
        entry("hello", str(WELCOME)),
        entry("example_key", str("example_value")),
      ],
    };
    return { kind: "map", items: [entry("Welcome!", section)] };
  }
  return {
    kind: "map",
    items: [
      entry("hello", str(WELCOME)),
      entry("example_key", str("example_value")),
      comment(" Example comment"),
      entry("example_array", { kind: "seq", items: [str("example_value1"), str("example_value2")] }),
      entry("example_number", { kind: "scalar", type: "float", value: 1234.56789 }),
      entry("example_booleans", {
        kind: "seq",
        items: [
          { kind: "scalar", type: "bool", value: true },
          { kind: "scalar", type: "bool", value: false },
        ],
      }),
    ],
  };
}

/** version.AIsNewerThanB: is SOPS_VERSION newer than the document's (1.x always older)? */
export function isOlderVersion(version: string): boolean {
  if (version.startsWith("1.")) return true;
  const parse = (v: string) => {
    const [core = "", pre] = v.replace(/^v/, "").split(/[-+]/, 2);
    return { nums: core.split(".").map(Number), pre: v.includes("-") ? pre : undefined };
  };
  const a = parse(SOPS_VERSION);
  const b = parse(version);
  for (let i = 0; i < 3; i++) {
    const d = (a.nums[i] ?? 0) - (b.nums[i] ?? 0);
    if (d !== 0) return d > 0;
  }
  return a.pre === undefined && b.pre !== undefined;
}

interface Edited {
  readonly branches: Branch[];
  readonly metadata: Metadata;
}

/** runEditorUntilOk's checks, in sops's order and with its messages. */
function acceptEdit(codec: Codec, showMasterKeys: boolean, metadata: Metadata) {
  return (bytes: Uint8Array): Edited => {
    let branches: Branch[];
    let next = metadata;
    if (showMasterKeys) {
      try {
        const parsed = codec.parseEncrypted(bytes);
        branches = parsed.branches;
        next = metadataFromTree(parsed.metadata, KEY_KINDS);
      } catch (err) {
        throw new BootsealError("BAD_INPUT", `SOPS metadata is invalid (${describe(err)}).`);
      }
    } else {
      try {
        branches = codec.parsePlain(bytes);
      } catch (err) {
        if (hasCode(err, "ALREADY_ENCRYPTED")) {
          throw new BootsealError(
            "BAD_INPUT",
            "Tree not valid for encryption (the file has a top-level sops key).",
          );
        }
        throw new BootsealError(
          "BAD_INPUT",
          `Could not load tree, probably due to invalid syntax (${describe(err)}).`,
        );
      }
      if (branches.length === 0) {
        throw new BootsealError("BAD_INPUT", "Tree not valid for encryption (no document).");
      }
    }
    if (next.keyGroups.every((g) => g.length === 0)) {
      throw new BootsealError(
        "BAD_INPUT",
        "No master keys were provided, so bootseal can't encrypt the file.",
      );
    }
    if (isOlderVersion(next.version)) next = { ...next, version: SOPS_VERSION };
    return { branches, metadata: next };
  };
}

function describe(err: unknown): string {
  return isBootsealError(err) ? err.message : "unreadable";
}

type Values = Record<string, unknown> & {
  "input-type"?: string;
  "output-type"?: string;
  "ignore-mac"?: boolean;
  "decryption-order"?: string;
  "show-master-keys"?: boolean;
};

/** A new file: sops's example, keys from the flags or .sops.yaml, a data key wrapped now (as sops does). */
async function newDocument(file: string, format: Format, values: Values, io: CliIo) {
  const deps = providerDeps(io.env);
  const setup = keySetup(file, values, io, deps);
  const codec = codecFor(format);
  const plain = codec.parsePlain(codec.emitPlain([exampleBranch(format)]));
  const dataKey = new Uint8Array(randomBytes(32));
  const keyGroups = await wrapDataKey(dataKey, setup.groups, { threshold: setup.threshold });
  const threshold = setup.threshold ? setup.threshold : keyGroups.length > 1 ? keyGroups.length : 0;
  const metadata: Metadata = {
    keyGroups,
    ...(threshold !== 0 ? { shamirThreshold: threshold } : {}),
    lastModified: formatLastModified(new Date()),
    mac: "",
    rule: setup.rule === undefined ? DEFAULT_RULE : setup.rule,
    macOnlyEncrypted: setup.macOnlyEncrypted === true,
    version: SOPS_VERSION,
  };
  return { plain, metadata, dataKey };
}

export async function runEdit(file: string, values: Values, io: CliIo): Promise<number> {
  const path = resolve(io.cwd, file);
  const formats = pickFormats(path, values);
  const existing = await exists(path);
  const doc = existing
    ? await openDocument(await readFileBounded(path), formats.input, {
        deps: providerDeps(io.env),
        resolve: keyResolver(values, providerDeps(io.env)),
        order: parseDecryptionOrder(values["decryption-order"]),
        ignoreMac: values["ignore-mac"] === true,
      })
    : await newDocument(path, formats.input, values, io);
  verbose(
    io,
    existing ? "Data key recovered successfully" : "Data key generated and wrapped for the new file",
  );
  try {
    const input = codecFor(formats.input);
    const output = codecFor(formats.output);
    const show = values["show-master-keys"] === true;
    // sops writes the temporary file with the output store and reads it back with the input store.
    const initial = show
      ? output.emitEncrypted(doc.plain, metadataToTree(doc.metadata, KEY_KINDS))
      : output.emitPlain(doc.plain);
    const edited = await editUntilValid(
      { name: path, initial, accept: acceptEdit(input, show, doc.metadata) },
      io,
    );
    await replaceFile(path, reseal(edited.branches, edited.metadata, doc.dataKey, formats.output));
    verbose(io, "File written successfully");
    return 0;
  } finally {
    closeDocument(doc);
  }
}

export const editCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    const file = positionals[0];
    if (file === undefined) throw new BootsealError("NO_FILE", "no file specified");
    if (positionals.length > 1)
      io.stderr.write("bootseal: WARNING: more than one file given; only the first is edited\n");
    return runEdit(file, values, io);
  },
};
