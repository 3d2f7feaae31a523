/**
 * The machine's TPM endorsement key for a BootsealConfig with `spec.tpm`: the Machine's
 * annotation (an inventory's or an operator's word wins), else the field `spec.tpm.ekFieldPath`
 * of the Machine's infrastructure object (a provider that reports its host's EK). Either may be
 * PEM or SubjectPublicKeyInfo as base64 DER; the service gets base64 DER (X-Bootseal-Tpm-Ek).
 */
import { createPublicKey } from "node:crypto";
import { BootsealError } from "../errors.ts";
import type { Obj } from "./capi-objects.ts";
import { ANNOTATION_TPM_EK, type TpmSealSpec } from "./spec.ts";

/** What the publish sends: the EK and the PCR policy header's text. */
export interface TpmSeal {
  readonly ekPublic: string;
  readonly pcrs?: string;
}

/** The value at a dotted path, if it is a string. */
function fieldAt(obj: unknown, path: string): string | undefined {
  let at: unknown = obj;
  for (const part of path.split(".")) {
    if (typeof at !== "object" || at === null || !Object.hasOwn(at, part)) return undefined;
    at = (at as Record<string, unknown>)[part];
  }
  return typeof at === "string" ? at : undefined;
}

/** PEM or base64 DER to base64 DER SubjectPublicKeyInfo; BAD_INPUT names where it came from. */
export function ekSpki(text: string, from: string): string {
  const given = text.trim();
  try {
    const key = given.startsWith("-----BEGIN")
      ? createPublicKey(given)
      : createPublicKey({
          key: Buffer.from(given.replace(/\s+/g, ""), "base64"),
          format: "der",
          type: "spki",
        });
    return key.export({ format: "der", type: "spki" }).toString("base64");
  } catch {
    throw new BootsealError(
      "BAD_INPUT",
      `${from} is not a public key (PEM, or base64 DER SubjectPublicKeyInfo)`,
    );
  }
}

/** Where the EK is looked for, for the condition's message. */
export function ekSources(spec: TpmSealSpec): string {
  const annotation = `the Machine's annotation ${ANNOTATION_TPM_EK}`;
  return spec.ekFieldPath ? `${annotation} or the infrastructure object's ${spec.ekFieldPath}` : annotation;
}

/**
 * The EK and policy to seal to, or null while neither source has an EK yet. `infra` is the
 * Machine's infrastructure object (null: not there yet), read only when the spec names a path.
 */
export function tpmSealOf(spec: TpmSealSpec, machine: Obj, infra: Obj | null): TpmSeal | null {
  const annotated = machine.metadata.annotations?.[ANNOTATION_TPM_EK];
  let ek: string | null = null;
  if (annotated !== undefined && annotated.trim() !== "") {
    ek = ekSpki(annotated, `the Machine's annotation ${ANNOTATION_TPM_EK}`);
  } else if (spec.ekFieldPath !== undefined && infra !== null) {
    const value = fieldAt(infra, spec.ekFieldPath);
    if (value !== undefined && value.trim() !== "")
      ek = ekSpki(value, `${infra.kind} ${infra.metadata.name} ${spec.ekFieldPath}`);
  }
  if (ek === null) return null;
  const pcrs = spec.pcrs
    ? Object.entries(spec.pcrs)
        .map(([index, value]) => `${index}=${value.toLowerCase()}`)
        .join(",")
    : undefined;
  return { ekPublic: ek, ...(pcrs ? { pcrs } : {}) };
}
