/**
 * The checks made through the service's API: it answers (/healthz), its clock (the Date
 * header), it is ready (/readyz), the credential and what only the service can try (POST
 * /v1/check: the store takes a write, every creation rule's keys wrap), the executables it
 * serves, and the URL machines are sent to answers from here.
 */
import type { KeyObject } from "node:crypto";
import { describeError } from "../../errors.ts";
import type { ClientSettings } from "../service-client.ts";
import { artifactChecks, type ExternalArtifacts } from "./artifact-checks.ts";
import { answerError, probe } from "./probe.ts";
import type { CheckLine, Outcome } from "./report.ts";

/** Clock differences: above WARN a warning, above FAIL a failure (the default JWT `clockSkew`). */
const SKEW_WARN_MS = 5_000;
const SKEW_FAIL_MS = 60_000;

export interface ServiceCheckOptions {
  readonly settings: ClientSettings;
  /** `publicUrl` as machines see it (--machine-url); default: the configured one. */
  readonly machineUrl: URL | undefined;
  readonly artifactKey: KeyObject | undefined;
}

interface ServiceAnswer {
  readonly publicUrl: string | null;
  readonly fetcherArtifactUrls: ExternalArtifacts;
  readonly checks: readonly { name: string; ok: boolean; message: string }[];
}

function seconds(ms: number): string {
  return ms < 120_000 ? `${(ms / 1000).toFixed(0)}s` : `${(ms / 60_000).toFixed(0)}m`;
}

export function clockLine(section: string, serverDate: string | undefined, localMs: number): CheckLine {
  const at = serverDate === undefined ? Number.NaN : Date.parse(serverDate);
  if (Number.isNaN(at))
    return { section, name: "clock", outcome: "warn", message: "the answer has no Date header" };
  // The header has whole seconds: up to 1 s of the difference is its rounding.
  const skew = at - localMs;
  const abs = Math.abs(skew);
  const outcome: Outcome = abs > SKEW_FAIL_MS ? "fail" : abs > SKEW_WARN_MS ? "warn" : "ok";
  const which = skew > 0 ? "ahead of" : "behind";
  const message =
    abs <= 1_000
      ? "the service's clock agrees with this one (Date header)"
      : `the service's clock is ${seconds(abs)} ${which} this one${outcome === "fail" ? ": token expiry and machine logins (JWT, AWS signatures) go wrong" : ""}`;
  return { section, name: "clock", outcome, message };
}

async function serviceCheck(
  settings: ClientSettings,
  section: string,
): Promise<{
  lines: CheckLine[];
  answer: ServiceAnswer | undefined;
}> {
  const line = (name: string, outcome: Outcome, message: string): CheckLine => ({
    section,
    name,
    outcome,
    message,
  });
  if (!settings.token) {
    return {
      lines: [
        line("credential", "warn", "no token (--token-file or BOOTSEAL_TOKEN): store and keys not checked"),
      ],
      answer: undefined,
    };
  }
  const res = await probe(settings, "POST", "/v1/check", { auth: true });
  if (res.status === 403)
    return {
      lines: [line("credential", "warn", `${answerError(res)}: store and keys not checked (needs admin)`)],
      answer: undefined,
    };
  if (res.status !== 200) return { lines: [line("credential", "fail", answerError(res))], answer: undefined };
  const answer = JSON.parse(new TextDecoder().decode(res.body)) as ServiceAnswer;
  return {
    lines: [
      line("credential", "ok", "accepted, with the admin scope"),
      ...answer.checks.map((c) => line(c.name, c.ok ? "ok" : "fail", c.message)),
    ],
    answer,
  };
}

/** The URL machines are sent to, from here: it resolves and its /healthz answers. */
async function machineUrlCheck(
  settings: ClientSettings,
  section: string,
  given: URL | undefined,
  configured: string | null | undefined,
): Promise<CheckLine> {
  const line = (outcome: Outcome, message: string): CheckLine => ({
    section,
    name: "public url",
    outcome,
    message,
  });
  const target = given ?? (configured ? new URL(configured) : undefined);
  if (!target) {
    return configured === null
      ? line("warn", "publicUrl is not set: only a loopback listener makes user-data stubs")
      : line("warn", "not checked: give --machine-url (the check endpoint was not answered)");
  }
  let note = "";
  if (given && configured && new URL(configured).origin !== given.origin)
    note = ` (stubs name publicUrl ${configured}, not this URL)`;
  try {
    const res = await probe(settings, "GET", "/healthz", { base: target });
    if (res.status !== 200)
      return line("fail", `${target.href}: /healthz answered ${answerError(res)}${note}`);
    return line(note ? "warn" : "ok", `${target.href} answers from here${note}`);
  } catch (err) {
    return line("fail", `${target.href}: ${describeError(err, "").message}${note}`);
  }
}

/** /readyz's `checks` (probe -> "ok" | "unavailable"); nothing when the answer is not that JSON. */
function readyChecks(body: Uint8Array): Record<string, string> {
  try {
    const parsed = JSON.parse(new TextDecoder().decode(body)) as { checks?: Record<string, string> };
    return parsed.checks ?? {};
  } catch {
    return {};
  }
}

export async function serviceChecks(options: ServiceCheckOptions): Promise<CheckLine[]> {
  const { settings } = options;
  const section = `service ${settings.server.href}`;
  const line = (name: string, outcome: Outcome, message: string): CheckLine => ({
    section,
    name,
    outcome,
    message,
  });
  const started = Date.now();
  let health: Awaited<ReturnType<typeof probe>>;
  try {
    health = await probe(settings, "GET", "/healthz");
  } catch (err) {
    // Nothing else can be checked through a service that does not answer.
    return [line("service", "fail", describeError(err, "").message)];
  }
  const took = Date.now() - started;
  if (health.status !== 200) return [line("service", "fail", `/healthz: ${answerError(health)}`)];
  const lines = [line("service", "ok", `answers (/healthz in ${took} ms)`)];
  const date = health.headers.date;
  lines.push(clockLine(section, typeof date === "string" ? date : undefined, started + took / 2));
  const ready = await probe(settings, "GET", "/readyz");
  const probes = Object.entries(readyChecks(ready.body))
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  lines.push(
    ready.status === 200
      ? line("ready", "ok", `ready (${probes})`)
      : line("ready", "fail", `/readyz: HTTP ${ready.status} (${probes || "no detail"})`),
  );
  const { lines: checked, answer } = await serviceCheck(settings, section);
  lines.push(...checked);
  try {
    lines.push(
      ...(await artifactChecks(settings, section, options.artifactKey, answer?.fetcherArtifactUrls)),
    );
  } catch (err) {
    lines.push(line("artifacts", "fail", describeError(err, "").message));
  }
  lines.push(
    await machineUrlCheck(settings, section, options.machineUrl, answer ? answer.publicUrl : undefined),
  );
  return lines;
}
