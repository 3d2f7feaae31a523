/**
 * The service's metrics as Prometheus sees them (docs/api.md "Metrics"), checked with the real
 * promtool (Debian's prometheus package): two replicas (two apps, each with its own file store
 * over one directory) serve publishes, fetches, status posts and failures; then
 * `promtool check metrics` passes on each live /metrics scrape, every label value is lower
 * case (but a bucket's `le="+Inf"`, as the format spells it), `bootseal_machines{phase}` is the same fleet-wide count on both replicas whichever
 * wrote, the boot duration histogram counts each succeeded machine once across the replicas
 * (a repeated `succeeded` is not counted again), failures are counted by reason code, and
 * `bootseal_build_info` names the package's version. The alert rules pass `promtool check
 * rules` and their unit tests (`promtool test rules`); every expression of the Grafana
 * dashboard and of the alerts parses (promtool, as recording rules) and names only metrics
 * a live scrape has.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { createFileStore } from "../../providers/stores/file.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { peer } from "../helpers/peers.ts";
import { appConfig } from "./app-config.ts";

const promtool = peer("PROMTOOL");
const REPO = new URL("../../", import.meta.url).pathname;
const ALERTS_DIR = join(REPO, "deploy/prometheus");
const DASHBOARD = join(REPO, "deploy/grafana/bootseal-dashboard.json");

const recipient = await identityToRecipient(await generateX25519Identity());
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** One clock for both replicas, moved by the test: boot durations are exact. */
let clock = Date.parse("2026-12-02T00:00:00Z");
const now = () => new Date(clock);

const dir = mkdtempSync(join(tmpdir(), "bootseal-metrics-"));
const replicas = ["a", "b"].map(() =>
  buildApp({
    logger: false,
    store: createFileStore(join(dir, "store")),
    now,
    config: appConfig({
      statusReports: { coalesceMs: 0, maxHeldMachines: 1 },
      // Every scrape counts: the test reads the counts right after its writes.
      metrics: { phaseRefreshMs: 0 },
      oneTimeFetch: "off",
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      trustProxy: false,
    }),
  }),
);
const urls: string[] = [];

before(async () => {
  for (const app of replicas) urls.push(await app.listen({ host: "127.0.0.1", port: 0 }));
});
after(async () => {
  await Promise.all(replicas.map((app) => app.close()));
  rmSync(dir, { recursive: true, force: true });
});

async function call(
  replica: number,
  method: string,
  path: string,
  token: string,
  body?: string | object,
): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (typeof body === "string") headers["content-type"] = "application/octet-stream";
  else if (body) headers["content-type"] = "application/json";
  const res = await fetch(`${urls[replica]}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  return { status: res.status, text: await res.text() };
}

async function publish(replica: number, name: string): Promise<string> {
  const res = await call(replica, "PUT", `/v1/machines/prod/${name}/config`, ADMIN, `secret of ${name}`);
  assert.ok(res.status === 200 || res.status === 201, res.text);
  return (JSON.parse(res.text) as { bootstrapToken: string }).bootstrapToken;
}

async function report(replica: number, name: string, token: string, phase: string, message?: string) {
  const res = await call(replica, "POST", `/v1/machines/prod/${name}/status`, token, {
    phase,
    ...(message ? { message } : {}),
  });
  assert.equal(res.status, 200, res.text);
}

async function scrape(replica: number): Promise<string> {
  const res = await fetch(`${urls[replica]}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** The text format's samples (label values without escapes: the service's have none). */
function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) labels[k!] = v!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of a metric's samples whose labels include `where`. */
function total(all: readonly Sample[], name: string, where: Record<string, string> = {}): number {
  return all
    .filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

function phases(all: readonly Sample[]): Record<string, number> {
  return Object.fromEntries(
    all.filter((s) => s.name === "bootseal_machines").map((s) => [s.labels.phase, s.value]),
  );
}

function promtoolRun(args: string[], input?: string, cwd?: string) {
  const r = spawnSync(promtool, args, { input, cwd, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** Names a scrape can answer for: every family (with a histogram's series) and every sample. */
function exportedNames(text: string): Set<string> {
  const names = new Set(samples(text).map((s) => s.name));
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name!);
    if (type === "histogram") for (const s of ["_bucket", "_sum", "_count"]) names.add(`${name}${s}`);
  }
  return names;
}

const PROMQL_WORDS = new Set([
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "bool",
  "offset",
]);
const PROMQL_OPERATORS = new Set(["and", "or", "unless"]);

/** The metric names a PromQL expression selects (not functions, labels, keywords or strings). */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings
    .replace(/\{[^}]*\}/g, "") // label matchers
    .replace(/\[[^\]]*\]/g, "") // ranges and subqueries
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "") // label lists
    .replace(/\boffset\s+\w+/g, "");
  const names: string[] = [];
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = m[0];
    const rest = stripped.slice(m.index + word.length);
    if (/^\s*\(/.test(rest)) continue; // a function or an aggregation
    if (PROMQL_WORDS.has(word) || PROMQL_OPERATORS.has(word)) continue;
    if (/[0-9]$/.test(stripped.slice(0, m.index))) continue; // a unit: 30m, 1e3
    names.push(word);
  }
  return names;
}

/** Every `expr` of the dashboard (panels, rows and template queries). */
function dashboardExprs(): string[] {
  const out: string[] = [];
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === "object") {
      for (const [k, v] of Object.entries(node)) {
        if (k === "expr" && typeof v === "string") out.push(v);
        else walk(v);
      }
    }
  };
  walk(JSON.parse(readFileSync(DASHBOARD, "utf8")));
  return out;
}

/** Grafana's variables replaced by what Prometheus would get. */
const asPromql = (expr: string) => expr.replaceAll("$__rate_interval", "5m").replace(/\$\{?(\w+)\}?/g, ".*");

const alertExprs = (): string[] =>
  [
    ...readFileSync(join(ALERTS_DIR, "bootseal-alerts.yaml"), "utf8").matchAll(
      /expr: (?:\|\n((?:\s{10}.*\n)+)|(.*)\n)/g,
    ),
  ].map((m) => (m[1] ?? m[2] ?? "").trim());

let names: Set<string>;
let bootstrapSeconds = 0;

test("two replicas: publishes, a fetch, status posts and failures", async () => {
  // m1 boots: published through a, fetched and reported through both.
  const t1 = await publish(0, "m1");
  const fetched = await call(1, "GET", "/v1/machines/prod/m1/config", t1);
  assert.equal(fetched.status, 200, fetched.text);
  clock += 12_000;
  await report(1, "m1", t1, "fetching");
  await report(0, "m1", t1, "decrypted");
  await report(1, "m1", t1, "written");
  await report(0, "m1", t1, "running");
  clock += 30_000;
  await report(1, "m1", t1, "succeeded");
  bootstrapSeconds = 42;
  // m2 fails with the fetcher's reason code, m3 with a message that names none.
  const t2 = await publish(1, "m2");
  await report(0, "m2", t2, "fetching");
  await report(1, "m2", t2, "failed", "MAC_MISMATCH: the document's MAC does not verify");
  const t3 = await publish(0, "m3");
  await report(0, "m3", t3, "failed", "the machine gave up");
  // m4 is published only, m5 stays in `running`.
  await publish(1, "m4");
  const t5 = await publish(1, "m5");
  await report(0, "m5", t5, "running");
});

test("machines per phase: the same fleet-wide counts on both replicas, whichever wrote", async () => {
  const expected = {
    published: 1,
    fetching: 0,
    decrypted: 0,
    written: 0,
    running: 1,
    succeeded: 1,
    failed: 2,
  };
  for (const replica of [0, 1])
    assert.deepEqual(phases(samples(await scrape(replica))), expected, `replica ${replica}`);
  // A write through b is in a's next count.
  const t6 = await publish(1, "m6");
  await report(1, "m6", t6, "fetching");
  const [a, b] = [samples(await scrape(0)), samples(await scrape(1))];
  assert.equal(phases(a).fetching, 1);
  assert.deepEqual(phases(a), phases(b));
  const counted = a.find((s) => s.name === "bootseal_machines_counted_timestamp_seconds");
  assert.ok(counted && counted.value > 0, "the count's time is exported");
});

test("the boot duration is observed once per machine across replicas; failures by reason", async () => {
  const count = async () =>
    total(samples(await scrape(0)), "bootseal_machine_bootstrap_duration_seconds_count") +
    total(samples(await scrape(1)), "bootseal_machine_bootstrap_duration_seconds_count");
  assert.equal(await count(), 1);
  const [a, b] = [samples(await scrape(0)), samples(await scrape(1))];
  const sum =
    total(a, "bootseal_machine_bootstrap_duration_seconds_sum") +
    total(b, "bootseal_machine_bootstrap_duration_seconds_sum");
  assert.equal(sum, bootstrapSeconds, "published at t, succeeded at t + 42 s");
  assert.equal(
    total(b, "bootseal_machine_bootstrap_duration_seconds_bucket", { le: "60" }),
    1,
    "the replica that wrote `succeeded` observed it",
  );
  // The machine says `succeeded` again (a retry), through the other replica: not a second boot.
  const token = await publish(0, "m7");
  clock += 5000;
  await report(0, "m7", token, "succeeded");
  await report(1, "m7", token, "succeeded");
  assert.equal(await count(), 2);
  const failures = (reason: string) =>
    total(a, "bootseal_machine_failures_total", { reason }) +
    total(b, "bootseal_machine_failures_total", { reason });
  assert.equal(failures("mac_mismatch"), 1);
  assert.equal(failures("other"), 1);
});

test("promtool check metrics passes on each live scrape; every label value is lower case", async () => {
  for (const replica of [0, 1]) {
    const text = await scrape(replica);
    names = exportedNames(text);
    const r = promtoolRun(["check", "metrics"], text);
    assert.equal(r.code, 0, r.out);
    assert.equal(r.out.trim(), "", "no lint findings");
    for (const s of samples(text)) {
      for (const [k, v] of Object.entries(s.labels)) {
        if (k !== "le") assert.equal(v, v.toLowerCase(), `${s.name}{${k}="${v}"}`);
      }
    }
    assert.doesNotMatch(text, /^nodejs_active_\w+_total/m);
    assert.match(text, /^nodejs_eventloop_lag_p99_seconds /m);
    assert.match(text, /^nodejs_active_handles\{/m);
  }
  const all = samples(await scrape(0));
  // Refusals are counted in snake case: a token that a new publish replaced.
  const replaced = await publish(0, "m8");
  await publish(1, "m8");
  assert.equal((await call(0, "GET", "/v1/machines/prod/m8/config", replaced)).status, 401);
  const after = samples(await scrape(0));
  assert.equal(
    total(after, "bootseal_fetches_total", { outcome: "unauthorized" }) -
      total(all, "bootseal_fetches_total", { outcome: "unauthorized" }),
    1,
  );
  const info = all.filter((s) => s.name === "bootseal_build_info");
  const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
  assert.deepEqual(
    info.map((s) => ({ ...s.labels, value: s.value })),
    [{ version: pkg.version, node_version: process.versions.node, value: 1 }],
  );
});

test("the alert rules pass promtool check rules and their unit tests", () => {
  const check = promtoolRun(["check", "rules", "bootseal-alerts.yaml"], undefined, ALERTS_DIR);
  assert.equal(check.code, 0, check.out);
  assert.match(check.out, /SUCCESS: 9 rules found/);
  const unit = promtoolRun(["test", "rules", "bootseal-alerts.test.yaml"], undefined, ALERTS_DIR);
  assert.equal(unit.code, 0, unit.out);
  assert.match(unit.out, /SUCCESS/);
});

test("every dashboard and alert expression parses and names only metrics the service exports", () => {
  assert.ok(names, "the scrape test ran first");
  const dashboard = dashboardExprs();
  assert.ok(dashboard.length >= 25, `${dashboard.length} expressions`);
  const alerts = alertExprs();
  assert.equal(alerts.length, 9);
  // promtool parses each expression as a recording rule.
  const scratch = mkdtempSync(join(tmpdir(), "bootseal-exprs-"));
  try {
    const rules = [...dashboard.map(asPromql), ...alerts].map(
      (e, i) => `      - record: expr_${i}\n        expr: ${JSON.stringify(e)}\n`,
    );
    writeFileSync(join(scratch, "exprs.yaml"), `groups:\n  - name: exprs\n    rules:\n${rules.join("")}`);
    const r = promtoolRun(["check", "rules", "exprs.yaml"], undefined, scratch);
    assert.equal(r.code, 0, r.out);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const used = new Set<string>();
  for (const e of dashboard) for (const n of metricNames(asPromql(e))) used.add(n);
  for (const e of alerts) for (const n of metricNames(e)) if (n !== "up") used.add(n); // `up` is Prometheus's own
  const missing = [...used].filter((n) => !names.has(n));
  assert.deepEqual(missing, [], "metrics the dashboard or the alerts use that /metrics does not have");
  for (const n of [
    "bootseal_machines",
    "bootseal_machine_bootstrap_duration_seconds_bucket",
    "bootseal_machine_failures_total",
    "nodejs_eventloop_lag_p99_seconds",
  ]) {
    assert.ok(used.has(n), `${n} is used`);
  }
  // The extractor itself: a name inside a label matcher, a function and a keyword are not metrics.
  assert.deepEqual(
    metricNames('sum by (le) (rate(x_bucket{job="y_total"}[5m])) / on (job) z offset 5m and w'),
    ["x_bucket", "z", "w"],
  );
});
