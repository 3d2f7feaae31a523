/**
 * The checks of the service's configuration file, made here with this machine's credentials:
 * the file is valid as `bootseal serve` reads it, the machine login bindings are well-formed,
 * and each creation rule's keys wrap a throwaway data key and unwrap it where a credential
 * is here (a key only machines can open is encrypt-only from here: a warning, not a failure).
 */
import { resolve } from "node:path";
import { NO_CREDENTIAL, probeRuleKeys } from "../../config/key-probe.ts";
import {
  applyEnv,
  readServiceConfigFile,
  type ServiceConfig,
  validateServiceConfig,
} from "../../config/service-config.ts";
import { describeError } from "../../errors.ts";
import type { CliIo } from "../command.ts";
import { providerDeps } from "../sops-file.ts";
import type { CheckLine, Outcome } from "./report.ts";

/** The key calls of all rules together may take this long. */
const KEYS_TIMEOUT_MS = 30_000;

export async function configChecks(file: string, io: CliIo): Promise<CheckLine[]> {
  const section = `config ${file}`;
  const line = (name: string, outcome: Outcome, message: string): CheckLine => ({
    section,
    name,
    outcome,
    message,
  });
  let config: ServiceConfig;
  try {
    config = validateServiceConfig(applyEnv(readServiceConfigFile(resolve(io.cwd, file)), io.env), io.cwd);
  } catch (err) {
    const { message } = describeError(err, "");
    // A binding's own error gets the bindings' line: it is what the operator has to fix.
    const name = message.startsWith("machineAuth.bindings") ? "login bindings" : "config";
    return [line(name, "fail", message)];
  }
  const bindings = config.machineAuth.bindings;
  const methods = [...new Set(bindings.map((b) => b.method))].join(", ");
  const lines = [
    line(
      "config",
      "ok",
      `valid: ${config.creationRules.creationRules?.length ?? 0} creation rules, store ${config.store}`,
    ),
    line(
      "login bindings",
      "ok",
      bindings.length === 0
        ? "none (machines use bootstrap tokens)"
        : `${bindings.length} well-formed (${methods})`,
    ),
  ];
  const probes = await probeRuleKeys(config.creationRules, providerDeps(io.env), {
    unwrap: true,
    signal: AbortSignal.timeout(KEYS_TIMEOUT_MS),
  });
  for (const p of probes) {
    const name = `rule ${p.rule} ${p.kind}`;
    const key = (outcome: Outcome, message: string) => lines.push(line(name, outcome, `${p.id}: ${message}`));
    if (p.wrap !== "ok") key("fail", `wrap: ${p.wrap}`);
    else if (p.unwrap === "ok") key("ok", "wraps and unwraps a data key");
    else if (p.unwrap === NO_CREDENTIAL)
      key("warn", "wraps; no credential here to unwrap (encrypt-only from here)");
    else key("fail", `wraps, but unwrap: ${p.unwrap}`);
  }
  return lines;
}
