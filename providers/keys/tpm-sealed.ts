/**
 * `tpm` master keys (a bootseal extension; sops has no such kind and cannot decrypt a document
 * whose only keys are these): the data key sealed to one machine's TPM, optionally in one
 * boot state. Wrap runs anywhere with node:crypto only (tpm-sealed-object.ts: a duplicated
 * sealed data object under the machine's EK, PolicyPCR over the expected sha256 PCR values);
 * unwrap runs on that machine through tpm2-tools (tpm-sealed-unseal.ts), reaching the TPM by
 * BOOTSEAL_TPM_TCTI (default device:/dev/tpmrm0).
 *
 * A key in text form (`--tpm-ek`, SOPS_TPM_EK, `.sops.yaml` `tpm_ek`): the EK public key as
 * a file (PEM, DER SubjectPublicKeyInfo, or the TPM2B_PUBLIC tpm2_createek -u writes), an
 * inline PEM, or its SubjectPublicKeyInfo as one line of base64, then optionally `#PCR=HEX` per PCR of the policy with its expected sha256
 * value: `ek.pem#7=3d45…#16=0000…`. In `key_groups`: `tpm: [{ek: …, pcrs: {"7": HEX}}]`.
 * In a service's creation rule the EK may be `publish` (EK_FROM_PUBLISH): each publish brings
 * its machine's EK (docs/api.md, X-Bootseal-Tpm-Ek) and withPublishedEk puts it in; such an
 * entry seals nothing anywhere else.
 * Entry fields: `ek_public` (base64 DER SubjectPublicKeyInfo), `pcrs` (`sha256:7,16`, absent
 * without a policy), `policy` (the PolicyPCR digest, hex), `created_at`, `enc` (base64 of the
 * TPM2B_PUBLIC, TPM2B_PRIVATE and TPM2B_ENCRYPTED_SECRET TPM2_Import takes).
 */
import { createHash, createPublicKey, type KeyObject } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import type { CallOptions } from "../../src/call-options.ts";
import {
  entryString,
  type KeyEntry,
  type KeyKindFormat,
  type MasterKey,
} from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";
import { checkCreatedAt, decodeStdBase64, entryWithCreatedAt, stringField } from "./entry-fields.ts";
import { type BaseDeps, type ConfigItem, itemString, type MasterKeyType, newEntry } from "./key-type.ts";
import { defaultTemplateEk, MAX_PCR, pcrPolicyDigest, sealToEk } from "./tpm-sealed-object.ts";
import { unsealWithTpm } from "./tpm-sealed-unseal.ts";
import { parsePublic, type TpmPublic, TpmWireError } from "./tpm-wire.ts";
import { TPM_DEFAULT_TCTI } from "./tpm2-tools.ts";

const KIND = "tpm";

export const TPM_SEALED_FORMAT: KeyKindFormat = {
  kind: KIND,
  fields: ["ek_public", "pcrs", "policy", "created_at", "enc"],
  omitEmpty: ["pcrs", "policy"],
  mapFields: [],
  alwaysInGroup: false,
  readRank: 7,
  decryptionRank: 7,
  identity: (entry) => identityOf(entryString(entry, "ek_public"), entryString(entry, "policy")),
  encSyntax: /^[A-Za-z0-9+/]+={0,2}$/,
};

/** The EK by the SHA-256 of its SubjectPublicKeyInfo (as the `tpm` login enrols it), and the policy. */
function identityOf(ekPublic: string, policy: string): string {
  const ekSha256 = createHash("sha256").update(Buffer.from(ekPublic, "base64")).digest("hex");
  return policy === "" ? `tpm:${ekSha256}` : `tpm:${ekSha256}:policy:${policy}`;
}

const spki = (key: KeyObject): string => key.export({ format: "der", type: "spki" }).toString("base64");

/** The EK public key: inline PEM or base64 DER, or a file (PEM, DER SPKI, TPM2B_PUBLIC). */
function loadEk(text: string): KeyObject {
  const given = text.trim();
  try {
    if (given.startsWith("-----BEGIN")) return createPublicKey(given);
    if (!existsSync(given)) {
      if (!/^[A-Za-z0-9+/]{40,}={0,2}$/.test(given)) {
        throw new BootsealError("BAD_INPUT", `tpm: no EK public key file ${given.slice(0, 200)}`);
      }
      return createPublicKey({ key: Buffer.from(given, "base64"), format: "der", type: "spki" });
    }
    const bytes = readFileSync(given);
    if (bytes.subarray(0, 10).toString("latin1").startsWith("-----BEGIN")) return createPublicKey(bytes);
    try {
      return parsePublic(bytes).key;
    } catch {
      return createPublicKey({ key: bytes, format: "der", type: "spki" });
    }
  } catch (err) {
    if (err instanceof BootsealError) throw err;
    throw new BootsealError(
      "BAD_INPUT",
      `tpm: not an EK public key (PEM, base64 DER or TPM2B_PUBLIC): ${given.slice(0, 80)}`,
    );
  }
}

/** The EK of the default template: RSA 2048 or ECC P-256, else BAD_INPUT. */
/** The key of a SubjectPublicKeyInfo in base64 DER; BAD_INPUT with `message` when it is none. */
function spkiKey(base64: string, message: string): KeyObject {
  try {
    return createPublicKey({ key: Buffer.from(base64, "base64"), format: "der", type: "spki" });
  } catch {
    throw new BootsealError("BAD_INPUT", message);
  }
}

function ekOf(key: KeyObject): TpmPublic {
  try {
    return defaultTemplateEk(key);
  } catch (err) {
    if (err instanceof TpmWireError) throw new BootsealError("BAD_INPUT", `tpm: ${err.message}`);
    throw err;
  }
}

function pcrIndex(text: string, what: string): number {
  const n = /^\d{1,2}$/.test(text) ? Number(text) : -1;
  if (n < 0 || n > MAX_PCR) throw new BootsealError("BAD_INPUT", `${what}: PCR ${text} is not 0-${MAX_PCR}`);
  return n;
}

function pcrValue(text: string, what: string): Buffer {
  if (!/^(0x)?[0-9a-fA-F]{64}$/.test(text)) {
    throw new BootsealError("BAD_INPUT", `${what}: a PCR value must be a sha256 digest in hex (64 digits)`);
  }
  return Buffer.from(text.replace(/^0x/, ""), "hex");
}

/** The EK of a service creation rule's entry that each publish names (withPublishedEk). */
export const EK_FROM_PUBLISH = "publish";

/** The entry's fields for an EK (SubjectPublicKeyInfo, base64 DER) and PCR values. */
function tpmFields(ekPublic: string, pcrs: ReadonlyMap<number, Buffer>): [string, string][] {
  const indices = [...pcrs.keys()].sort((a, b) => a - b);
  const policy = indices.length === 0 ? "" : pcrPolicyDigest(pcrs).toString("hex");
  return [
    ["ek_public", ekPublic],
    ["pcrs", indices.length === 0 ? "" : `sha256:${indices.join(",")}`],
    ["policy", policy],
  ];
}

/** A new entry: the EK and, with PCR values, the PolicyPCR digest and its selection. */
function tpmEntry(ekText: string, pcrs: ReadonlyMap<number, Buffer>): KeyEntry {
  if (ekText.trim() === EK_FROM_PUBLISH) return newEntry(KIND, tpmFields("", pcrs));
  const key = loadEk(ekText);
  ekOf(key);
  return newEntry(KIND, tpmFields(spki(key), pcrs));
}

/** `PCR=HEX` parts (of `EK#PCR=HEX#…` or a publish's `7=HEX,16=HEX`) as a PCR policy. */
export function parsePcrValues(parts: readonly string[], what: string): Map<number, Buffer> {
  const pcrs = new Map<number, Buffer>();
  for (const part of parts) {
    const eq = part.indexOf("=");
    if (eq < 0) throw new BootsealError("BAD_INPUT", `${what}: expected PCR=HEX, got ${part.slice(0, 40)}`);
    const index = pcrIndex(part.slice(0, eq).trim(), what);
    if (pcrs.has(index)) throw new BootsealError("BAD_INPUT", `${what}: PCR ${index} is given twice`);
    pcrs.set(index, pcrValue(part.slice(eq + 1).trim(), what));
  }
  return pcrs;
}

/** `EK[#PCR=HEX]…` */
function entryFromText(text: string): KeyEntry {
  const [ek = "", ...policyParts] = text.split("#");
  return tpmEntry(ek, parsePcrValues(policyParts, "tpm key"));
}

/** Whether a rule's entry waits for the EK a publish brings (`publish` in place of the EK). */
export function isEkFromPublish(entry: KeyEntry): boolean {
  return entry.kind === KIND && entry.fields.get("ek_public") === "";
}

/**
 * A rule's `publish` entry with the machine's EK (SubjectPublicKeyInfo, base64 DER, as a publish
 * sends it) and, when the publish names PCR values, its policy in place of the rule's.
 */
export function withPublishedEk(
  entry: KeyEntry,
  ekPublic: string,
  pcrs: ReadonlyMap<number, Buffer> | undefined,
  what: string,
): KeyEntry {
  const key = spkiKey(ekPublic, `${what}: not an EK public key (base64 DER SubjectPublicKeyInfo)`);
  ekOf(key);
  if (pcrs === undefined) {
    const fields = new Map(entry.fields);
    fields.set("ek_public", spki(key));
    return { ...entry, fields };
  }
  return newEntry(KIND, tpmFields(spki(key), pcrs));
}

function entryFromConfig(item: ConfigItem): KeyEntry {
  const what = "tpm key";
  const ek = itemString(item, "ek", what);
  if (ek === "") throw new BootsealError("BAD_INPUT", `${what} needs ek (an EK public key PEM or file)`);
  const given = typeof item === "string" ? undefined : item.get("pcrs");
  if (typeof given === "string")
    throw new BootsealError("BAD_INPUT", `${what}: pcrs must map PCR numbers to values`);
  const pcrs = new Map<number, Buffer>();
  for (const [index, value] of Object.entries(given ?? {}))
    pcrs.set(pcrIndex(index, what), pcrValue(value, what));
  return tpmEntry(ek, pcrs);
}

interface TpmSealedSettings {
  readonly ekPublic: string;
  readonly ek: TpmPublic;
  readonly pcrs: readonly number[];
  readonly policy: string;
}

function settingsOf(entry: KeyEntry): TpmSealedSettings {
  const label = "tpm entry";
  const ekPublic = stringField(entry.fields, "ek_public", label);
  if (ekPublic === "") {
    throw new BootsealError(
      "BAD_INPUT",
      `tpm key ${EK_FROM_PUBLISH}: its EK comes with each publish to the service (X-Bootseal-Tpm-Ek), nothing can be sealed to it here`,
    );
  }
  const ek = ekOf(spkiKey(ekPublic, `${label}: ek_public is not a base64 DER public key`));
  const pcrText = stringField(entry.fields, "pcrs", label);
  const policy = stringField(entry.fields, "policy", label);
  const m = /^sha256:(\d{1,2}(?:,\d{1,2})*)$/.exec(pcrText);
  if (
    (pcrText === "") !== (policy === "") ||
    (pcrText !== "" && !m) ||
    (policy !== "" && !/^[0-9a-f]{64}$/.test(policy))
  ) {
    throw new BootsealError(
      "BAD_INPUT",
      `${label}: pcrs (sha256:N,…) and policy (64 hex digits) go together`,
    );
  }
  const pcrs = m ? (m[1] as string).split(",").map((p) => pcrIndex(p, label)) : [];
  checkCreatedAt(entry.fields.get("created_at"), `${label} ${identityOf(ekPublic, policy)}`);
  return { ekPublic, ek, pcrs, policy };
}

function tpmKey(s: TpmSealedSettings, deps: BaseDeps): MasterKey {
  const id = identityOf(s.ekPublic, s.policy);
  return {
    kind: KIND,
    id,
    async wrap(secret: Uint8Array): Promise<string> {
      return sealToEk(s.ek, Buffer.from(secret), Buffer.from(s.policy, "hex")).toString("base64");
    },
    async unwrap(enc: string, options?: CallOptions): Promise<Uint8Array | null> {
      const blob = Buffer.from(decodeStdBase64(enc, `tpm entry ${id}`));
      const env = deps.env ?? process.env;
      const tcti = env.BOOTSEAL_TPM_TCTI || TPM_DEFAULT_TCTI;
      // No TPM on this machine: not our key here, try the next one.
      if (tcti === TPM_DEFAULT_TCTI && !existsSync("/dev/tpmrm0")) return null;
      const sealedTo = {
        ekSha256: createHash("sha256").update(Buffer.from(s.ekPublic, "base64")).digest("hex"),
        ekType: s.ek.key.asymmetricKeyType === "rsa" ? ("rsa" as const) : ("ecc" as const),
        pcrs: s.pcrs,
      };
      let secret: Buffer | null;
      try {
        secret = await unsealWithTpm(
          { tcti, who: "a tpm key", path: env.PATH, signal: options?.signal },
          sealedTo,
          blob,
        );
      } catch (err) {
        if (err instanceof TpmWireError)
          throw new BootsealError("BAD_INPUT", `tpm entry ${id}: enc: ${err.message}`);
        throw err;
      }
      return secret === null ? null : new Uint8Array(secret);
    },
    toMetadata(enc: string, createdAt: Date): KeyEntry {
      const fields: [string, string][] = [["ek_public", s.ekPublic]];
      if (s.policy !== "") fields.push(["pcrs", `sha256:${s.pcrs.join(",")}`], ["policy", s.policy]);
      return entryWithCreatedAt(KIND, fields, enc, createdAt);
    },
  };
}

/** An ECC P-256 EK's SubjectPublicKeyInfo, base64 DER (the one-line form). */
const EXAMPLE_EK =
  "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE6kUhUzciruXusCj302PPhYSrzn26570z59y+WSQwM6qM9Wpc9JdEekXcmTQLnnY5sLfi8TttHreQGTRxuCAVDQ==";

export const tpmSealedKeyType: MasterKeyType<"tpm", BaseDeps> = {
  kind: KIND,
  format: TPM_SEALED_FORMAT,
  flag: {
    flag: "tpm-ek",
    env: "SOPS_TPM_EK",
    help: "comma separated list of TPM endorsement key public keys (files, PEM or base64 DER; #PCR=SHA256HEX per PCR of a policy; bootseal only)",
    example: EXAMPLE_EK,
    rank: 7,
  },
  config: { groupKey: "tpm", groupItem: "mapping", shorthandKey: "tpm_ek" },
  entryFromText,
  entriesFromConfig: (item) => [entryFromConfig(item)],
  fromMetadata: (entry, deps) => tpmKey(settingsOf(entry), deps),
  fromUserInput(text: string, deps: BaseDeps): MasterKey[] {
    return text
      .split(",")
      .filter((part) => part.trim() !== "")
      .map((part) => tpmKey(settingsOf(entryFromText(part)), deps));
  },
};
