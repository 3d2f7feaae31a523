/**
 * Master keys from metadata entries: a document's entries (rotate, updatekeys) and the entries
 * a creation rule or a flag names (`enc: ""`). Shared by the CLI and the service, which both
 * turn `.sops.yaml`-shaped creation rules into MasterKeys.
 */

import type { ProviderDeps } from "../../providers/keys/index.ts";
import { keyTypeOf } from "../../providers/keys/index.ts";
import type { KeyEntry, MasterKey } from "../envelope/sops/master-key.ts";
import { formatLastModified } from "../envelope/sops/metadata.ts";
import { BootsealError } from "../errors.ts";

export function masterKeyFromEntry(entry: KeyEntry, deps: ProviderDeps): MasterKey {
  const type = keyTypeOf(entry.kind);
  if (!type) throw new BootsealError("UNSUPPORTED", `${entry.kind} keys are not supported by this build`);
  return type.fromMetadata(entry, deps);
}

/**
 * A key named by a creation rule or a flag has no created_at yet; providers validate entries
 * as they appear in documents, so give it the time of this wrap (age entries have none).
 */
export function newKeyFromEntry(entry: KeyEntry, deps: ProviderDeps, now: Date = new Date()): MasterKey {
  const kinds = keyTypeOf(entry.kind)?.format.fields ?? [];
  if (!kinds.includes("created_at") || entry.fields.has("created_at")) return masterKeyFromEntry(entry, deps);
  const fields = new Map(entry.fields);
  fields.set("created_at", formatLastModified(now));
  return masterKeyFromEntry({ ...entry, fields }, deps);
}
