/**
 * The plaintext documents bench/sops-compare.ts encrypts and decrypts: generated afresh on
 * every run from random bytes (no fixed document the code could be tuned to), in the shapes
 * sops users keep: flat small files in each store, large nested YAML with comments and blank
 * lines (the parts sops keeps and encrypts), the same data as JSON, and a binary file.
 */
import { randomBytes } from "node:crypto";

const hex = (bytes: number): string => randomBytes(bytes).toString("hex");

/** 100 `key: value` lines. */
export function smallYaml(): string {
  const lines: string[] = [];
  for (let i = 0; i < 100; i++) lines.push(`key${i}: value-${i}-${hex(6)}`);
  return `${lines.join("\n")}\n`;
}

/** The same 100 values as one JSON object. */
export function smallJson(): string {
  const o: Record<string, string> = {};
  for (let i = 0; i < 100; i++) o[`key${i}`] = `value-${i}-${hex(6)}`;
  return `${JSON.stringify(o, null, 2)}\n`;
}

/** 100 `KEY=value` lines. */
export function smallDotenv(): string {
  const lines: string[] = [];
  for (let i = 0; i < 100; i++) lines.push(`KEY_${i}=value-${i}-${hex(6)}`);
  return `${lines.join("\n")}\n`;
}

/** 10,000 leaves: 100 services, each with nested settings and a list of 60 items. */
export function largeYaml(): string {
  const out: string[] = [];
  for (let s = 0; s < 100; s++) {
    out.push(`service${s}:`);
    out.push(`    name: svc-${s}`);
    out.push(`    port: ${8000 + s}`);
    out.push(`    enabled: ${s % 2 === 0}`);
    out.push(`    ratio: ${s}.5`);
    out.push("    db:");
    for (let d = 0; d < 36; d++) out.push(`        field${d}: ${hex(8)}`);
    out.push("    tokens:");
    for (let t = 0; t < 60; t++) out.push(`        - ${hex(8)}`);
  }
  return `${out.join("\n")}\n`;
}

/**
 * The same shape as largeYaml with what hand-kept files have: a head comment per service,
 * trailing comments on some values, a comment before the list, blank lines between services.
 * sops encrypts the comments too, so they are values of the tree.
 */
export function largeYamlWithComments(): string {
  const out: string[] = ["# services of the fleet", ""];
  for (let s = 0; s < 100; s++) {
    out.push(`# service ${s}, owned by team-${s % 7}`);
    out.push(`service${s}:`);
    out.push(`    name: svc-${s}  # its DNS name`);
    out.push(`    port: ${8000 + s}`);
    out.push(`    enabled: ${s % 2 === 0}`);
    out.push(`    ratio: ${s}.5`);
    out.push("    db:");
    for (let d = 0; d < 36; d++)
      out.push(`        field${d}: ${hex(8)}${d % 6 === 0 ? "  # rotated yearly" : ""}`);
    out.push("    # access tokens, newest last");
    out.push("    tokens:");
    for (let t = 0; t < 60; t++) out.push(`        - ${hex(8)}`);
    out.push("");
  }
  return `${out.join("\n")}\n`;
}

/** largeYaml's data as indented JSON (numbers, booleans, nested objects, arrays). */
export function largeJson(): string {
  const o: Record<string, unknown> = {};
  for (let s = 0; s < 100; s++) {
    const db: Record<string, string> = {};
    for (let d = 0; d < 36; d++) db[`field${d}`] = hex(8);
    const tokens: string[] = [];
    for (let t = 0; t < 60; t++) tokens.push(hex(8));
    o[`service${s}`] = { name: `svc-${s}`, port: 8000 + s, enabled: s % 2 === 0, ratio: s + 0.5, db, tokens };
  }
  return `${JSON.stringify(o, null, 2)}\n`;
}

export const binary = (bytes: number): Buffer => randomBytes(bytes);
