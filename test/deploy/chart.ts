/**
 * The Helm chart (deploy/helm/bootseal) as the deploy tests render it: the real helm
 * (scripts/peers/helm.sh) with its homes in the test's directory, the rendered objects, and the
 * rendered bootseal.yaml with the chart's in-pod paths mapped to files a local process can read.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { runChild } from "../helpers/child.ts";
import { peer } from "../helpers/peers.ts";

export const ROOT = join(import.meta.dirname, "..", "..");
export const CHART = join(ROOT, "deploy", "helm", "bootseal");
export const RELEASE = "mgmt";

/**
 * The Kubernetes version helm renders for: the kube peer's (scripts/peers/kube.sh; the API-server
 * tests check the server reports it). A constant, so the rendering tests need no API server.
 */
export const KUBE_VERSION = "v1.34.4";

/** A rendered object: untyped YAML, whose shape the assertions check as they walk it. */
// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are walked by the assertions themselves
export type Obj = Record<string, any>;

export function parseAll(text: string): Obj[] {
  return parseAllDocuments(text)
    .map((d) => {
      assert.deepEqual(d.errors, [], "helm rendered YAML that does not parse");
      return d.toJS() as Obj | null;
    })
    .filter((o): o is Obj => o !== null);
}

export function only(objects: Obj[], kind: string, name?: string): Obj {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
  assert.equal(found.length, 1, `expected one ${kind}${name ? ` ${name}` : ""}, rendered ${found.length}`);
  return found[0] as Obj;
}

export interface ChartTools {
  /** helm with these arguments must succeed: its standard output. */
  helm(args: readonly string[]): Promise<string>;
  /** Writes values to a JSON file in the test's directory: its path. */
  valuesFile(name: string, values: object): string;
  /** `helm template` into the namespace, with these values: the objects. */
  render(values?: object, name?: string): Promise<Obj[]>;
  /** `helm template` with these values must fail: its error output. */
  templateRefused(values: object, name: string): Promise<string>;
}

/** helm with its cache, config and data homes under `dir` (nothing under ~). */
export function chartTools(dir: string, namespace: string): ChartTools {
  const home = join(dir, "helm-home");
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    HELM_CACHE_HOME: join(home, "cache"),
    HELM_CONFIG_HOME: join(home, "config"),
    HELM_DATA_HOME: join(home, "data"),
  };
  const helm = async (args: readonly string[]): Promise<string> => {
    const result = await runChild(peer("HELM_BIN"), args, { env });
    assert.equal(result.status, 0, `helm ${args.join(" ")} failed:\n${result.stderr}${result.stdout}`);
    return result.stdout.toString();
  };
  const valuesFile = (name: string, values: object): string => {
    const path = join(dir, `${name}.json`);
    writeFileSync(path, JSON.stringify(values));
    return path;
  };
  const templateArgs = (values: object | undefined, name: string) => {
    const args = ["template", RELEASE, CHART, "--namespace", namespace, "--kube-version", KUBE_VERSION];
    if (values) args.push("--values", valuesFile(name, values));
    return args;
  };
  return {
    helm,
    valuesFile,
    render: async (values, name = "values") => parseAll(await helm(templateArgs(values, name))),
    async templateRefused(values, name) {
      const result = await runChild(peer("HELM_BIN"), templateArgs(values, name), { env });
      assert.notEqual(result.status, 0, `helm accepted ${JSON.stringify(values)}`);
      return result.stderr.toString();
    },
  };
}

/**
 * The rendered bootseal.yaml with the chart's in-pod paths (/etc/bootseal/…, /var/run/secrets/…)
 * mapped to files under `dir`: a CA certificate for `…ca.crt`, 32 random bytes for the
 * derivation key, a placeholder for anything else (a token file).
 */
export function localized(dir: string, raw: Record<string, unknown>, caPem: string): Record<string, unknown> {
  const files = join(dir, "files", randomBytes(4).toString("hex"));
  mkdirSync(files, { recursive: true });
  const map = (v: unknown): unknown => {
    if (typeof v === "string" && /^\/(etc\/bootseal|var\/run\/secrets)\//.test(v)) {
      const local = join(files, v.replaceAll("/", "_"));
      if (v.endsWith("ca.crt")) writeFileSync(local, caPem);
      else if (v.includes("derivation")) writeFileSync(local, randomBytes(32), { mode: 0o600 });
      else writeFileSync(local, "placeholder\n", { mode: 0o600 });
      return local;
    }
    if (Array.isArray(v)) return v.map(map);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, map(x)]));
    return v;
  };
  return map(raw) as Record<string, unknown>;
}
