/**
 * The pure parts of bench/boot-storm.ts: percentiles, the Prometheus text parser for the
 * service's store-operation counter (checked against prom-client's own output), the ratios and
 * the Markdown table, the storm loop's first-wave split. No server, no peer.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Counter, Registry } from "prom-client";
import {
  type Answer,
  HttpClient,
  type Machine,
  newRecorder,
  type Protocol,
  storm,
} from "../../bench/lib/storm-client.ts";
import { payloadMaker } from "../../bench/lib/storm-protocols.ts";
import {
  deltaPerMachine,
  formatCount,
  markdownTable,
  percentile,
  ratio,
  STORE_OPS_COUNTER,
  stormLine,
  sumMetric,
  summarise,
  type TargetResult,
} from "../../bench/lib/storm-stats.ts";

describe("percentiles", () => {
  const hundred = Array.from({ length: 100 }, (_, i) => i + 1);
  it("nearest rank over 1..100", () => {
    assert.equal(percentile(hundred, 50), 50);
    assert.equal(percentile(hundred, 99), 99);
    assert.equal(percentile(hundred, 100), 100);
    assert.equal(percentile(hundred, 0), 1);
    assert.equal(percentile(hundred, 99.5), 100);
  });
  it("small and empty inputs", () => {
    assert.ok(Number.isNaN(percentile([], 50)));
    assert.equal(percentile([7], 99), 7);
    assert.equal(percentile([1, 2], 50), 1);
    assert.equal(percentile([1, 2], 51), 2);
  });
  it("summarise sorts its input (and leaves it alone)", () => {
    const samples = [30, 10, 20, 1000, 40];
    const s = summarise(samples);
    assert.deepEqual(s, { count: 5, p50: 30, p99: 1000, max: 1000 });
    assert.deepEqual(samples, [30, 10, 20, 1000, 40]);
    assert.ok(Number.isNaN(summarise([]).p99));
  });
});

describe("the store-operation counter in Prometheus text", () => {
  it("sums every series of prom-client's own exposition", async () => {
    const registry = new Registry();
    const ops = new Counter({
      name: STORE_OPS_COUNTER,
      help: "store calls",
      labelNames: ["op", "outcome"] as const,
      registers: [registry],
    });
    // A neighbour whose name starts the same must not count.
    const other = new Counter({ name: `${STORE_OPS_COUNTER}_other`, help: "x", registers: [registry] });
    ops.inc({ op: "get", outcome: "ok" }, 7);
    ops.inc({ op: "put", outcome: "conflict" }, 2);
    ops.inc({ op: "head", outcome: "not_found" });
    other.inc(100);
    assert.equal(sumMetric(await registry.metrics(), STORE_OPS_COUNTER), 10);
  });
  it("handles label values with spaces and braces, exponents and timestamps; skips comments", () => {
    const text = [
      `# HELP ${STORE_OPS_COUNTER} calls {op="get"} 99`,
      `# TYPE ${STORE_OPS_COUNTER} counter`,
      `${STORE_OPS_COUNTER}{op="get",outcome="a b} c"} 1.5e3`,
      `${STORE_OPS_COUNTER}{op="list",outcome="ok"} 4 1700000000000`,
      `${STORE_OPS_COUNTER} 6`,
      `bootseal_http_requests_total{route="/x"} 1000`,
      `${STORE_OPS_COUNTER}{op="get"} NaN`,
      "",
    ].join("\n");
    assert.equal(sumMetric(text, STORE_OPS_COUNTER), 1510);
  });
  it("is undefined when the counter is absent (printed as n/a)", () => {
    assert.equal(sumMetric("# HELP x y\nx 1\n", STORE_OPS_COUNTER), undefined);
    assert.equal(deltaPerMachine(["x 1"], ["x 2"], STORE_OPS_COUNTER, 10), undefined);
  });
  it("per machine: the growth summed over the replicas", () => {
    const m = (n: number) => `${STORE_OPS_COUNTER}{op="get",outcome="ok"} ${n}\n`;
    assert.equal(deltaPerMachine([m(10), m(0)], [m(110), m(160)], STORE_OPS_COUNTER, 20), 13);
    // A counter that first appears in the later scrape starts from 0.
    assert.equal(deltaPerMachine([""], [m(30)], STORE_OPS_COUNTER, 10), 3);
    assert.equal(deltaPerMachine([], [], STORE_OPS_COUNTER, 10), undefined);
  });
});

const lat = (p99: number) => ({ count: 10, p50: p99 / 2, p99, max: p99 });
function result(label: string, over: Partial<TargetResult>): TargetResult {
  return {
    label,
    machines: 2000,
    stormSeconds: 10,
    publishSeconds: 4,
    stormRequests: 12_000,
    fetch: lat(100),
    status: lat(200),
    publish: lat(300),
    peakRssMiB: [120],
    storeOpsPerMachine: undefined,
    errors: 0,
    ...over,
  };
}

describe("the result table", () => {
  const bao = result("OpenBao", { stormSeconds: 5, publishSeconds: 2, fetch: lat(50) });
  const file = result("bootseal, file store", {
    storeOpsPerMachine: 13,
    peakRssMiB: [238.4, 246.6],
    cpuMsPerMachine: { publish: 1.54, storm: 3 },
  });
  const table = markdownTable([file, bao], bao).split("\n");

  it("has a header, a separator of the same width and one row per target", () => {
    assert.equal(table.length, 4);
    const cols = (l: string) => l.split(" | ").length;
    assert.equal(cols(table[1] as string), cols(table[0] as string));
    assert.equal(cols(table[2] as string), cols(table[0] as string));
    assert.match(table[0] as string, /\| 2,000 machines \|/);
  });
  it("bootseal's row: rates, p99s, RSS per process, store ops and ratios to OpenBao", () => {
    const cells = (table[2] as string).split(" | ");
    assert.equal(cells[0], "| bootseal, file store");
    assert.equal(cells[1], "200"); // 2000 machines / 10 s
    assert.equal(cells[2], "10.0 s");
    assert.equal(cells[3], "1,200"); // req/s
    assert.equal(cells[4], "500"); // publish/s
    assert.equal(cells[5], "100 ms");
    assert.equal(cells[8], "238 + 247 MiB");
    assert.equal(cells[9], "13.0");
    assert.equal(cells[10], "1.5 + 3.0"); // server CPU ms per machine, publish + storm
    assert.equal(cells[11], "0.50×"); // machines/s: 200 / 400
    assert.equal(cells[12], "0.50×"); // publish/s: 500 / 1000
    assert.equal(cells[13], "2.00×"); // fetch p99: 100 / 50
    assert.equal(cells[14], "1.00×");
  });
  it("OpenBao's own row has no ratios; a missing store-op count is n/a", () => {
    const cells = (table[3] as string).split(" | ");
    assert.equal(cells[9], "n/a");
    assert.equal(cells[10], "n/a");
    assert.deepEqual(cells.slice(11, 15), ["–", "–", "–", "–"]);
  });
  it("without OpenBao every ratio is a dash", () => {
    const only = markdownTable([file], undefined).split("\n")[2] as string;
    assert.deepEqual(only.split(" | ").slice(11, 15), ["–", "–", "–", "–"]);
  });
  it("formats the storm line and the helpers", () => {
    assert.equal(
      stormLine(result("x", { machines: 10_000, stormSeconds: 42.06 })),
      "10,000 machines in 42.1 s",
    );
    assert.equal(ratio(3, 2), "1.50×");
    assert.equal(ratio(3, 0), "n/a");
    assert.equal(ratio(undefined, 2), "n/a");
    assert.equal(formatCount(1234.6), "1,235");
    assert.equal(formatCount(Number.NaN), "n/a");
  });
});

describe("the storm payload", () => {
  it("is exactly the requested size and names its machine", () => {
    const make = payloadMaker(16 * 1024);
    const a = make("m1");
    assert.equal(Buffer.byteLength(a), 16 * 1024);
    assert.ok(a.startsWith("#cloud-config\n# machine m1\n"));
    assert.notEqual(make("m2"), a);
    assert.throws(() => payloadMaker(10)("m1"), /too small/);
  });
});

describe("the client's routing over two base URLs", () => {
  it("request: each request to the next; machine: every request of a machine to one", async () => {
    const { createServer } = await import("node:http");
    const seen: string[][] = [[], []];
    const servers = seen.map((log) =>
      createServer((req, res) => {
        log.push(req.url ?? "");
        res.end("ok");
      }),
    );
    const urls: string[] = [];
    for (const s of servers) {
      await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
      const a = s.address() as { port: number };
      urls.push(`http://127.0.0.1:${a.port}`);
    }
    try {
      const ac = new AbortController();
      const byRequest = new HttpClient(urls, 4, ac.signal, "request");
      for (let i = 0; i < 4; i++) await byRequest.call({ method: "GET", path: `/r${i}`, affinity: "m1" });
      assert.deepEqual(seen, [
        ["/r0", "/r2"],
        ["/r1", "/r3"],
      ]);
      for (const log of seen) log.length = 0;
      const byMachine = new HttpClient(urls, 4, ac.signal, "machine");
      for (const m of ["m1", "m2", "m3", "m4", "m5", "m6"]) {
        for (let i = 0; i < 3; i++) await byMachine.call({ method: "GET", path: `/${m}`, affinity: m });
      }
      for (const log of seen) {
        for (const path of new Set(log))
          assert.equal(log.filter((p) => p === path).length, 3, `${path}: all on one`);
      }
      assert.ok(seen[0]!.length > 0 && seen[1]!.length > 0, "machines are spread over both");
    } finally {
      for (const s of servers) s.closeAllConnections();
      for (const s of servers) await new Promise((r) => s.close(r));
    }
  });
});

describe("the storm's first wave", () => {
  const protocol = (fetched: string[]): Protocol => ({
    publish: async () => "t",
    fetch: async (_c, m) => {
      fetched.push(m.name);
      return { status: 200, headers: {}, body: Buffer.alloc(0) } satisfies Answer;
    },
    status: async () => {},
    verify: () => undefined,
  });
  const machines = (n: number): Machine[] =>
    Array.from({ length: n }, (_, i) => ({ name: `m${i}`, token: "t" }));

  it("closed loop: the first --concurrency machines' fetches are the first wave, every other one the rest", async () => {
    const rec = newRecorder();
    const fetched: string[] = [];
    await storm({} as HttpClient, protocol(fetched), machines(7), 3, 1000, rec, new AbortController().signal);
    assert.equal(fetched.length, 7);
    assert.equal(rec.latencies.fetch.length, 7);
    assert.equal(rec.fetchByWave.first.length, 3);
    assert.equal(rec.fetchByWave.rest.length, 4);
    assert.deepEqual(
      [...rec.fetchByWave.first, ...rec.fetchByWave.rest].sort((a, b) => a - b),
      [...rec.latencies.fetch].sort((a, b) => a - b),
    );
  });

  it("open loop (--rate): no wave is kept", async () => {
    const rec = newRecorder();
    await storm(
      {} as HttpClient,
      protocol([]),
      machines(4),
      2,
      1000,
      rec,
      new AbortController().signal,
      10_000,
    );
    assert.equal(rec.latencies.fetch.length, 4);
    assert.deepEqual(rec.fetchByWave, { first: [], rest: [] });
  });
});
