/**
 * The fetcher executables the service serves (GET /v1/artifacts/…): each one named in
 * SHA256SUMS downloaded with its `.sig` and checked as a stub checks it, its SHA-256 against
 * the sums and its Ed25519 signature against the service's `signing-key.pem` (or the key the
 * operator pins with `--artifact-public-key`).
 */
import type { KeyObject } from "node:crypto";
import {
  loadPublicKey,
  MAX_ARTIFACT_BYTES,
  readDigest,
  readSignature,
  verifyArtifact,
} from "../../artifact/signing.ts";
import { describeError } from "../../errors.ts";
import type { ClientSettings } from "../service-client.ts";
import { answerError, probe } from "./probe.ts";
import type { CheckLine, Outcome } from "./report.ts";

/** Where stubs get the executables when the service does not serve them (POST /v1/check). */
export interface ExternalArtifacts {
  readonly linux: string | null;
  readonly windows: string | null;
}

function samePublicKey(a: KeyObject, b: KeyObject): boolean {
  return a.export({ type: "spki", format: "der" }).equals(b.export({ type: "spki", format: "der" }));
}

export async function artifactChecks(
  settings: ClientSettings,
  section: string,
  pinned: KeyObject | undefined,
  external: ExternalArtifacts | undefined,
): Promise<CheckLine[]> {
  const line = (name: string, outcome: Outcome, message: string): CheckLine => ({
    section,
    name,
    outcome,
    message,
  });
  const sums = await probe(settings, "GET", "/v1/artifacts/SHA256SUMS");
  if (sums.status === 404) {
    const elsewhere = [external?.linux, external?.windows].filter((u): u is string => !!u);
    return elsewhere.length > 0
      ? [line("artifacts", "warn", `none served here; stubs download ${elsewhere.join(", ")} (not checked)`)]
      : [
          line(
            "artifacts",
            "fail",
            "the service serves no fetcher executable (artifacts.dir) and no fetcherArtifact is set: user-data stubs answer 501",
          ),
        ];
  }
  if (sums.status !== 200) return [line("artifacts", "fail", `SHA256SUMS: ${answerError(sums)}`)];
  const keyAnswer = await probe(settings, "GET", "/v1/artifacts/signing-key.pem");
  if (keyAnswer.status !== 200)
    return [line("signing key", "fail", `signing-key.pem: ${answerError(keyAnswer)}`)];
  const out: CheckLine[] = [];
  let key: KeyObject;
  try {
    key = loadPublicKey(keyAnswer.body, "the service's signing-key.pem");
  } catch (err) {
    return [line("signing key", "fail", describeError(err, "").message)];
  }
  if (pinned && !samePublicKey(pinned, key)) {
    out.push(line("signing key", "fail", "the service signs with another key than --artifact-public-key"));
    key = pinned;
  } else if (pinned) {
    out.push(line("signing key", "ok", "the service signs with the --artifact-public-key key"));
  }
  for (const text of new TextDecoder().decode(sums.body).split("\n")) {
    const m = /^\S+\s+\*?(\S+)$/.exec(text.trim());
    if (!m) continue;
    const file = m[1] as string;
    try {
      const expected = readDigest(text);
      const data = await probe(settings, "GET", `/v1/artifacts/${file}`, { maxBytes: MAX_ARTIFACT_BYTES });
      if (data.status !== 200) {
        out.push(line(file, "fail", answerError(data)));
        continue;
      }
      const sig = await probe(settings, "GET", `/v1/artifacts/${file}.sig`);
      if (sig.status !== 200) {
        out.push(line(file, "fail", `${file}.sig: ${answerError(sig)}`));
        continue;
      }
      const { sha256 } = verifyArtifact(data.body, readSignature(sig.body), key, expected);
      out.push(line(file, "ok", `signature and SHA-256 verify (${sha256.slice(0, 16)}…)`));
    } catch (err) {
      out.push(line(file, "fail", describeError(err, "").message));
    }
  }
  return out;
}
