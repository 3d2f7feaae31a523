/**
 * The binary codec (sops stores/json/store.go, BinaryStore): any file that is not YAML,
 * JSON, dotenv or INI. The plaintext is the file's bytes, held as one `str` value under the
 * key `data` (AAD `data:`) and never decoded as UTF-8, so any byte sequence round-trips. The
 * encrypted form is an ordinary sops JSON document, written and read by the JSON codec.
 */
import { BootsealError } from "../../../errors.ts";
import type { Branch, Mapping, Value } from "../document.ts";
import type { Codec, EmitOptions } from "./codec.ts";
import { jsonCodec } from "./json.ts";
import { checkOutputSize, outputBytes } from "./output.ts";

export const BINARY_DATA_KEY = "data";

function findData(branch: Branch): Value | undefined {
  for (const item of branch.items) {
    if (item.kind === "entry" && item.key === BINARY_DATA_KEY) return item.value;
  }
  return undefined;
}

export const binaryCodec: Codec = {
  format: "binary",
  singleValue: true,

  /**
   * Never ALREADY_ENCRYPTED: sops checks for a `sops` key in the loaded branch, which for
   * binary only ever holds `data`, so even an encrypted file is encrypted again as bytes.
   */
  parsePlain(bytes: Uint8Array): Branch[] {
    // A copy, so a caller that later wipes or reuses its buffer does not change the tree.
    const data = bytes.slice();
    return [
      {
        kind: "map",
        items: [{ kind: "entry", key: BINARY_DATA_KEY, value: { kind: "scalar", type: "str", value: data } }],
      },
    ];
  },

  /**
   * sops itself would only notice a missing `data` when writing the plaintext; refusing it
   * here reports the broken file before any key is unwrapped.
   */
  parseEncrypted(bytes: Uint8Array): { branches: Branch[]; metadata: Mapping } {
    const parsed = jsonCodec.parseEncrypted(bytes);
    const data = parsed.branches[0] === undefined ? undefined : findData(parsed.branches[0]);
    if (data === undefined || data.kind !== "scalar" || data.type !== "str") {
      throw new BootsealError("BAD_INPUT", "binary: encrypted file has no string 'data' member");
    }
    return parsed;
  },

  /** Exactly the bytes of `data`, as sops' EmitPlainFile does (no trailing newline added). */
  emitPlain(branches: readonly Branch[]): Uint8Array {
    const [branch] = branches;
    if (branch === undefined || branches.length !== 1) {
      throw new BootsealError("BAD_INPUT", "binary: there must be exactly one branch");
    }
    const data = findData(branch);
    if (data === undefined)
      throw new BootsealError("UNREPRESENTABLE", "error emitting binary store: no binary data found in tree");
    // `bytes` is accepted too: a decrypted `type:bytes` value is the same raw content.
    if (data.kind === "scalar" && (data.type === "str" || data.type === "bytes")) {
      if (typeof data.value === "string") return outputBytes("binary", data.value);
      checkOutputSize("binary", data.value.byteLength);
      return data.value.slice();
    }
    throw new BootsealError("BAD_INPUT", "binary: 'data' value is not a string");
  },

  emitEncrypted(branches: readonly Branch[], metadata: Mapping, options?: EmitOptions): Uint8Array {
    return jsonCodec.emitEncrypted(branches, metadata, options);
  },
};
