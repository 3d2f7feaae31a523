/**
 * User-data stubs for a machine with a published config (docs/userdata.md, docs/api.md).
 *
 * GET is safe: the stub of a published version is rendered again from what the publish
 * stored, byte for byte, and nothing is written. The publish DERIVED its token from the
 * service's derivation key, the machine, the version and a random salt (tokens.ts
 * deriveToken), so the token is re-derived here and checked against the stored digest; a
 * republish gives a new token and so a new stub. Without a derivation key, or after a token
 * was minted explicitly, GET answers 409 MINT_REQUIRED and POST mints (a fresh random token:
 * the previous one stops working). A machine that logs in with its cloud identity gets a
 * stub with no secret in it at all, from either.
 *
 * The executable depends on the platform: cloud-init and Ignition stubs download the Linux
 * fetcher, PowerShell stubs the Windows one, either the operator's (`fetcherArtifact`,
 * `fetcherArtifactWindows`) or the service's own (`/v1/artifacts/`, ../artifacts.ts). There
 * is no fallback from one platform to another: a missing executable is a 501 before anything
 * else is read.
 */
import type { FetcherArtifact } from "../../config/service-config.ts";
import { BootsealError } from "../../errors.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import { ARTIFACT_FILES, type ArtifactPlatform } from "../artifacts.ts";
import type { ServiceContext } from "../context.ts";
import { machineAuthFor as boundMethod } from "../identity/bindings.ts";
import { loginFlags } from "../identity/index.ts";
import { deriveToken, digestsEqual, mintToken, sha256Hex } from "../tokens.ts";
import {
  renderUserdata,
  type StubAuth,
  type UserdataFormat,
  type UserdataParams,
} from "../userdata/index.ts";

export type LinuxArch = "x64" | "arm64";

export interface UserdataRequest {
  readonly format: UserdataFormat;
  /** The Linux executable's architecture (cloud-init, Ignition); PowerShell is x64. */
  readonly arch: LinuxArch;
  /** The URL the stub reaches the service at (publicUrl, or a loopback listener's own: stub-origin.ts). */
  readonly serviceUrl: string;
  /** cloud-config modules the machine's fetch skips (`--skip-module`); none when empty. */
  readonly skipModules?: readonly string[];
}

export interface UserdataStub {
  readonly contentType: string;
  readonly body: string;
  /** The carried token's expiry; undefined when the stub carries none (a cloud identity). */
  readonly tokenExpiresAt: string | undefined;
}

/**
 * How this machine authenticates to fetch its config. The one place that chooses: a machine
 * with a cloud-identity binding (machineAuth.bindings) gets its method and login flags (no
 * secret in the stub); null: the bootstrap token.
 */
export function machineAuthFor(ctx: ServiceContext, m: MachineId): StubAuth | null {
  const method = boundMethod(ctx.machineAuth.bindings, m);
  return method === null ? null : { method, args: loginFlags(ctx.machineAuth, method).slice(2) };
}

/** What a publish stored about the current token, from the status record's mirror or the record. */
interface CurrentToken {
  readonly sha256: string;
  readonly expiresAt: string;
  readonly salt: string | undefined;
  readonly command: string | undefined;
}

async function currentToken(
  ctx: ServiceContext,
  m: MachineId,
): Promise<{ version: number; configEtag: string; token: CurrentToken }> {
  const status = await ctx.machines.readStatus(m);
  if (!status || status.value.config === null) {
    throw new BootsealError("NOT_FOUND", `no config is published for ${formatMachineId(m)}`);
  }
  let mirror: { sha256: string; expiresAt: string; salt?: string; command?: string } | null | undefined =
    status.value.token;
  // A status record from before the mirror: the token record says the same.
  if (mirror === undefined) mirror = (await ctx.machines.readToken(m))?.value;
  if (!mirror) throw new BootsealError("NOT_FOUND", `${formatMachineId(m)} has no bootstrap token`);
  return {
    version: status.value.version,
    configEtag: status.value.config.etag,
    token: { sha256: mirror.sha256, expiresAt: mirror.expiresAt, salt: mirror.salt, command: mirror.command },
  };
}

const mintHint = (m: MachineId) => `POST /v1/machines/${m.namespace}/${m.name}/userdata mints one explicitly`;

/** GET: the stub of the published version, rendered again; no store write. */
export async function getUserdata(
  ctx: ServiceContext,
  m: MachineId,
  req: UserdataRequest,
): Promise<UserdataStub> {
  const artifact = await artifactFor(ctx, req);
  const { version, token } = await currentToken(ctx, m);
  const cloud = machineAuthFor(ctx, m);
  if (cloud !== null) return render(req, m, cloud, token.command, artifact, undefined);
  const key = ctx.bootstrapToken.derivationKey;
  if (key === undefined) {
    throw new BootsealError(
      "MINT_REQUIRED",
      `the service has no bootstrapToken.derivationKeyFile, so a stub cannot be rendered twice: ${mintHint(m)}`,
    );
  }
  const derived = token.salt === undefined ? undefined : deriveToken(key, m, version, token.salt);
  if (derived === undefined || !digestsEqual(sha256Hex(derived), token.sha256)) {
    throw new BootsealError(
      "MINT_REQUIRED",
      `the current token of ${formatMachineId(m)} was not derived by its publish (minted by POST, or the derivation key changed): ${mintHint(m)}, or publish again`,
    );
  }
  if (Date.parse(token.expiresAt) <= ctx.now().getTime()) {
    throw new BootsealError(
      "MINT_REQUIRED",
      `the token of version ${version} of ${formatMachineId(m)} expired at ${token.expiresAt}: ${mintHint(m)}, or publish again`,
    );
  }
  return render(req, m, { method: "token", token: derived }, token.command, artifact, token.expiresAt);
}

/**
 * POST: mints a fresh random token (the previous one stops working) and renders it, with the
 * published bootstrap command. Rendered before anything is written: a stub that cannot be
 * made must not cost the machine its current token.
 */
export async function mintUserdata(
  ctx: ServiceContext,
  m: MachineId,
  req: UserdataRequest,
): Promise<UserdataStub> {
  const artifact = await artifactFor(ctx, req);
  const { token: current, configEtag } = await currentToken(ctx, m);
  // A machine that logs in with its cloud identity gets no token: nothing to mint.
  const cloud = machineAuthFor(ctx, m);
  if (cloud !== null) return render(req, m, cloud, current.command, artifact, undefined);
  const minted = mintToken(m, ctx.bootstrapToken.ttlMs, ctx.bootstrapToken.uses, ctx.now());
  // For the published config, with its bootstrap command.
  const record = {
    ...minted.record,
    configEtag,
    ...(current.command === undefined ? {} : { command: current.command }),
  };
  const stub = render(
    req,
    m,
    { method: "token", token: minted.token },
    current.command,
    artifact,
    record.expiresAt,
  );
  // The mirror first, as a publish does (machines/publish.ts).
  await ctx.machines.recordToken(m, record);
  await ctx.machines.writeToken(m, record);
  return stub;
}

function render(
  req: UserdataRequest,
  m: MachineId,
  auth: StubAuth,
  command: string | undefined,
  artifact: UserdataParams["artifact"],
  tokenExpiresAt: string | undefined,
): UserdataStub {
  const params: UserdataParams = {
    serviceUrl: req.serviceUrl,
    machine: m,
    auth,
    command,
    skipModules: req.skipModules,
    artifact,
  };
  const stub = renderUserdata(req.format, params);
  return { contentType: stub.contentType, body: stub.body, tokenExpiresAt };
}

/**
 * The executable a stub of this format downloads: the operator's when configured, else the
 * service's own; 501 UNSUPPORTED when neither exists.
 */
async function artifactFor(ctx: ServiceContext, req: UserdataRequest): Promise<UserdataParams["artifact"]> {
  const windows = req.format === "powershell";
  const configured = windows ? ctx.fetcherArtifactWindows : ctx.fetcherArtifact;
  if (configured) return configuredArtifact(configured, req.format);
  const platform: ArtifactPlatform = windows ? "windows-x64" : `linux-${req.arch}`;
  const set = await ctx.artifacts.get();
  const served = set.byPlatform.get(platform);
  if (!served || set.publicKeyPem === undefined) {
    throw new BootsealError(
      "UNSUPPORTED",
      `${req.format} user-data stubs need the ${windows ? "Windows" : "Linux"} executable ${ARTIFACT_FILES[platform]}: build it with \`npm run build:sea\` in a bootseal checkout and put it in the service's artifacts.dir (docs/releases.md), or configure ${windows ? "fetcherArtifactWindows" : "fetcherArtifact"}`,
    );
  }
  const url = `${req.serviceUrl}/v1/artifacts/${served.file}`;
  return {
    url,
    sha256: served.sha256,
    sha512: served.sha512,
    signatureUrl: `${url}.sig`,
    publicKeyPem: set.publicKeyPem,
  };
}

function configuredArtifact(a: FetcherArtifact, format: UserdataFormat): UserdataParams["artifact"] {
  if (format === "ignition" && a.sha512 === undefined) {
    throw new BootsealError(
      "UNSUPPORTED",
      "ignition user-data stubs pin the executable's SHA-512 (Ignition's verification.hash): set fetcherArtifact.sha512",
    );
  }
  return {
    url: a.url,
    sha256: a.sha256,
    sha512: a.sha512,
    signatureUrl: a.signatureUrl,
    publicKeyPem: a.publicKeyPem,
  };
}
