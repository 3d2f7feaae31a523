/**
 * cloud-init 22.4.2's ntp module (cc_ntp) for the distros bootseal applies it on (ubuntu,
 * debian: /etc/os-release ID under --root): the client picked as cc_ntp picks it (`ntp_client`,
 * or the first of chrony, systemd-timesyncd, ntp, ntpdate whose program is installed), its
 * existing config renamed to `.dist`, the config rendered from cloud-init's own template on
 * the machine (/etc/cloud/templates/NAME.tmpl; 4 `N.DISTRO.pool.ntp.org` pools when no
 * servers or pools are given) and written 0644, then `systemctl reload-or-restart SERVICE`
 * (`service SERVICE restart` without systemd). cloud-init installs a missing client with the
 * package manager; bootseal installs nothing and refuses (BAD_INPUT) instead, as it does a
 * custom `config`, a missing template and another distro.
 */
import type { BootsealError } from "../../errors.ts";
import {
  bad as badIn,
  exists,
  isDir,
  type Machine,
  readText,
  renamePath,
  runTool,
  shownName,
  which,
  writeText,
} from "./cloud-init-machine.ts";
import { renderCloudInitTemplate } from "./cloud-init-template.ts";
import { isPyMap, type PyValue, pyStr, truthy } from "./cloud-init-values.ts";

const MODULE = "ntp";

function bad(message: string): BootsealError {
  return badIn(MODULE, message);
}

interface NtpClient {
  readonly checkExe: string;
  readonly confpath: string;
  readonly service: string;
  /** `{distro}` replaced by the distro's name. */
  readonly template: string;
}

/** cc_ntp.NTP_CLIENT_CONFIG with DISTRO_CLIENT_CONFIG's debian/ubuntu changes (chrony's path). */
const CLIENTS: Readonly<Record<string, NtpClient>> = {
  chrony: {
    checkExe: "chronyd",
    confpath: "/etc/chrony/chrony.conf",
    service: "chrony",
    template: "chrony.conf.{distro}",
  },
  "systemd-timesyncd": {
    checkExe: "/lib/systemd/systemd-timesyncd",
    confpath: "/etc/systemd/timesyncd.conf.d/cloud-init.conf",
    service: "systemd-timesyncd",
    template: "timesyncd.conf",
  },
  ntp: { checkExe: "ntpd", confpath: "/etc/ntp.conf", service: "ntp", template: "ntp.conf.{distro}" },
  ntpdate: {
    checkExe: "ntpdate",
    confpath: "/etc/ntp.conf",
    service: "ntpdate",
    template: "ntp.conf.{distro}",
  },
};

/** Distro.preferred_ntp_clients (ubuntu and debian alike in 22.4.2). */
const PREFERRED = ["chrony", "systemd-timesyncd", "ntp", "ntpdate"] as const;

export const NTP_DISTROS = ["ubuntu", "debian"] as const;

export interface NtpPlan {
  readonly client: string | null;
  readonly servers: readonly string[];
  readonly pools: readonly string[];
}

function nameList(value: PyValue | undefined, key: string): string[] {
  if (value === undefined || !truthy(value)) return [];
  if (!Array.isArray(value)) throw bad(`${key} must be a list`);
  return (value as readonly PyValue[]).map((v) => {
    const text = pyStr(v);
    if (text === null) throw bad(`${key} entries must be names`);
    return text;
  });
}

/** The `ntp` key; null when absent or disabled (util.is_false of `enabled`). */
export function parseNtp(root: ReadonlyMap<unknown, PyValue>): NtpPlan | null {
  if (!root.has("ntp")) return null;
  const value = root.get("ntp") ?? null;
  const cfg: ReadonlyMap<unknown, PyValue> =
    value === null ? new Map() : (value as ReadonlyMap<unknown, PyValue>);
  if (!isPyMap(cfg)) throw bad("ntp must be a mapping");
  const enabled = cfg.has("enabled") ? (cfg.get("enabled") as PyValue) : true;
  const disabled =
    typeof enabled === "boolean"
      ? !enabled
      : ["off", "0", "no", "false"].includes((pyStr(enabled) ?? "").toLowerCase().trim());
  if (disabled) return null;
  if (truthy(cfg.get("config") ?? null)) throw bad("a custom client `config` is not applied");
  const chosen = cfg.get("ntp_client") ?? null;
  let client: string | null = null;
  if (truthy(chosen) && chosen !== "auto") {
    if (typeof chosen !== "string" || !(chosen in CLIENTS))
      throw bad(
        `ntp_client ${shownName(String(pyStr(chosen)))} is not one of ${Object.keys(CLIENTS).join(", ")}`,
      );
    client = chosen;
  }
  return {
    client,
    servers: nameList(cfg.get("servers"), "servers"),
    pools: nameList(cfg.get("pools"), "pools"),
  };
}

/** The distro cloud-init would run as: /etc/os-release's ID. */
async function distroOf(m: Machine): Promise<string> {
  const text = (await readText(m, "/etc/os-release")) ?? (await readText(m, "/usr/lib/os-release")) ?? "";
  const id = /^ID=["']?([^"'\n]*)["']?$/m.exec(text)?.[1] ?? "";
  if (!(NTP_DISTROS as readonly string[]).includes(id)) {
    throw bad(
      `the distro ${shownName(id || "unknown")} is not one bootseal applies ntp on (${NTP_DISTROS.join(", ")})`,
    );
  }
  return id;
}

export async function applyNtp(plan: NtpPlan, m: Machine): Promise<void> {
  const distro = await distroOf(m);
  let name = plan.client;
  if (name === null) {
    for (const candidate of PREFERRED) {
      if (await which(m, (CLIENTS[candidate] as NtpClient).checkExe)) {
        name = candidate;
        break;
      }
    }
  }
  if (name === null || !(await which(m, (CLIENTS[name] as NtpClient).checkExe))) {
    throw bad(
      `no NTP client installed (${name ?? PREFERRED.join(", ")}): cloud-init would install ${name ?? PREFERRED[0]} with the package manager; bootseal installs no packages`,
    );
  }
  const client = CLIENTS[name] as NtpClient;
  const templatePath = `/etc/cloud/templates/${client.template.replace("{distro}", distro)}.tmpl`;
  const template = await readText(m, templatePath);
  if (template === null) throw bad(`cloud-init's template ${templatePath} is not on the machine`);
  const pools =
    plan.servers.length === 0 && plan.pools.length === 0
      ? [0, 1, 2, 3].map((n) => `${n}.${distro}.pool.ntp.org`)
      : plan.pools;
  const text = renderCloudInitTemplate(
    template,
    new Map([
      ["servers", plan.servers],
      ["pools", pools],
    ]),
  );
  if (await exists(m, client.confpath)) await renamePath(m, client.confpath, `${client.confpath}.dist`);
  await writeText(m, client.confpath, text, { mode: 0o644 });
  // Distro.manage_service("reload"): systemd when /run/systemd/system is a directory.
  const argv = (await isDir(m, "/run/systemd/system"))
    ? ["systemctl", "reload-or-restart", client.service]
    : ["service", client.service, "restart"];
  await runTool(m, MODULE, argv);
}
