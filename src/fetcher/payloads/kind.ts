/**
 * Which kind of payload a decrypted config is, and the kind `--payload` forces.
 *
 *   cloud-config  first line `#cloud-config` (cloud-init's own test: case-insensitive, after
 *                 leading white space), or `## template: jinja` followed by it (Cluster API's
 *                 kubeadm provider emits that header)
 *   ignition      a JSON object with a string `ignition.version` (3.x, or 2.x: translated)
 *   manifest      bootseal's file manifest (anything else that is to be applied)
 *   raw           the bytes themselves, to --out
 *
 * Other cloud-init user-data types (`#!` scripts, `#include`, MIME multipart, boothooks, ...)
 * are named in the refusal instead of failing later as a manifest that does not parse.
 */
import { BootsealError } from "../../errors.ts";
import { isIgnitionConfig } from "./ignition.ts";

export const PAYLOAD_KINDS = ["cloud-config", "ignition", "manifest", "raw"] as const;
export type PayloadKind = (typeof PAYLOAD_KINDS)[number];
/** What --payload accepts. */
export const PAYLOAD_CHOICES = [...PAYLOAD_KINDS, "auto"] as const;
export type PayloadChoice = (typeof PAYLOAD_CHOICES)[number];

const JINJA_HEADER = "## template: jinja";

/** cloud-init's other user-data types, longest first as cloud-init matches them. */
const OTHER_USER_DATA: readonly (readonly [string, string])[] = [
  ["#cloud-config-archive", "a cloud-config archive"],
  ["#cloud-config-jsonp", "a cloud-config JSON patch"],
  ["#cloud-boothook", "a cloud boothook"],
  ["#include-once", "an #include-once list"],
  ["#part-handler", "a part handler"],
  ["#include", "an #include list"],
  ["#!", "a shell script"],
  ["content-type:", "a MIME multipart message"],
  ["mime-version:", "a MIME multipart message"],
];

/** The first `max` characters as lower-case text, or null when they are not UTF-8. */
function head(payload: Uint8Array, max = 256): string | null {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(payload.subarray(0, max)).toLowerCase();
  } catch {
    // A cut in the middle of a character at `max` is not a decoding failure of the payload.
    const text = new TextDecoder("utf-8", { fatal: false }).decode(payload.subarray(0, max));
    return text.slice(0, -1).includes("\ufffd") ? null : text.toLowerCase();
  }
}

/** The text after a `## template: jinja` first line, or null when there is none. */
export function afterJinjaHeader(text: string): string | null {
  const trimmed = text.trimStart();
  if (!trimmed.toLowerCase().startsWith(JINJA_HEADER)) return null;
  const newline = trimmed.indexOf("\n");
  return newline === -1 ? "" : trimmed.slice(newline + 1);
}

/** Whether text (no Jinja header) is a cloud-config by cloud-init's type_from_starts_with. */
export function isCloudConfigStart(text: string): boolean {
  const start = text.trimStart().toLowerCase();
  return start.startsWith("#cloud-config") && !OTHER_USER_DATA.some(([p]) => start.startsWith(p));
}

export function isCloudConfig(payload: Uint8Array): boolean {
  const text = head(payload);
  if (text === null) return false;
  return isCloudConfigStart(afterJinjaHeader(text) ?? text);
}

/** The kind to apply: the forced one, or the detected one for `auto`. */
export function payloadKind(choice: PayloadChoice, payload: Uint8Array): PayloadKind {
  if (choice !== "auto") return choice;
  if (isCloudConfig(payload)) return "cloud-config";
  if (isIgnitionConfig(payload)) return "ignition";
  const text = head(payload);
  const start = text === null ? "" : (afterJinjaHeader(text) ?? text).trimStart();
  const other = OTHER_USER_DATA.find(([prefix]) => start.startsWith(prefix));
  if (other !== undefined) {
    throw new BootsealError(
      "BAD_INPUT",
      `the payload is ${other[1]} (cloud-init user data bootseal does not apply); ` +
        "supported: #cloud-config, Ignition (spec 2.x and 3.x), the bootseal manifest",
    );
  }
  return "manifest";
}
