/**
 * The boot storm client: one code path for every target. node:http with a keep-alive Agent
 * (at most `concurrency` sockets), requests round-robin over the target's base URLs; phase 1
 * publishes every machine, phase 2 is the storm (per machine one fetch with its own token, then
 * five status posts in order, `concurrency` machines in flight). Every non-2xx answer and every
 * socket error is recorded, never dropped. Targets differ only in their Protocol: which
 * requests a publish, a fetch and a status post are (bench/lib/storm-protocols.ts).
 */
import { Agent, type IncomingHttpHeaders, request } from "node:http";
import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";

export interface Req {
  readonly method: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** The machine the request is for: with routing "machine" it picks the base URL. */
  readonly affinity?: string;
}

/** How requests spread over several base URLs: each in turn, or each machine to one. */
export type Routing = "request" | "machine";

/** A small, stable string hash (FNV-1a): a machine's replica. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

export interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

export type Kind = "publish" | "fetch" | "status";

/** A failed request: non-2xx (status set) or a socket error or timeout (status undefined). */
export class RequestFailure extends Error {
  readonly status: number | undefined;
  constructor(message: string, status: number | undefined) {
    super(message);
    this.status = status;
  }
}

const TIMEOUT_MS = 30_000;

export class HttpClient {
  readonly #urls: URL[];
  readonly #agent: Agent;
  readonly #signal: AbortSignal;
  // When each pooled socket last went idle: a reset on a reused socket says how long it sat.
  readonly #freedAt = new WeakMap<Socket, number>();
  readonly #routing: Routing;
  #next = 0;
  requests = 0;

  constructor(urls: readonly string[], sockets: number, signal: AbortSignal, routing: Routing = "request") {
    this.#urls = urls.map((u) => new URL(u));
    this.#routing = routing;
    // An idle pooled socket is closed after 2 s (the request's own timeout applies while it is
    // busy), well before bootseal's 5 s idle timeout: otherwise, whenever a replica gets no
    // request for 5 s (every worker waiting on the other one), the client reuses sockets the
    // server has just closed and gets ECONNRESET, the keep-alive race, a client artefact
    // (Node's agentKeepAliveTimeoutBuffer does not stop such reuse in Node 24.21). Counted if seen.
    this.#agent = new Agent({
      keepAlive: true,
      maxSockets: sockets,
      maxTotalSockets: sockets,
      timeout: 2000,
      // The most recently used socket first: the stalest ones idle out instead of being reused.
      scheduling: "lifo",
    });
    this.#agent.on("free", (socket: Socket) => this.#freedAt.set(socket, performance.now()));
    this.#signal = signal;
  }

  /** One request to the next base URL; resolves on 2xx, throws RequestFailure otherwise. */
  call(req: Req): Promise<Answer> {
    const turn =
      this.#routing === "machine" && req.affinity !== undefined ? fnv1a(req.affinity) : this.#next++;
    const base = this.#urls[turn % this.#urls.length] as URL;
    this.requests++;
    return new Promise((resolve, reject) => {
      const body = req.body === undefined ? undefined : Buffer.from(req.body);
      const headers: Record<string, string | number> = { ...req.headers };
      if (body) headers["content-length"] = body.length;
      const r = request(
        {
          host: base.hostname,
          port: base.port,
          method: req.method,
          path: req.path,
          headers,
          agent: this.#agent,
          signal: this.#signal,
          timeout: TIMEOUT_MS,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", (err) => reject(new RequestFailure(`response: ${err.message}`, undefined)));
          res.on("end", () => {
            const answer = { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) };
            if (answer.status >= 200 && answer.status < 300) resolve(answer);
            else {
              const text = answer.body.toString("utf8").slice(0, 200).replace(/\s+/g, " ");
              reject(new RequestFailure(`HTTP ${answer.status}: ${text}`, answer.status));
            }
          });
        },
      );
      r.on("timeout", () => r.destroy(new Error(`no answer in ${TIMEOUT_MS / 1000} s`)));
      r.on("error", (err: NodeJS.ErrnoException) => {
        const freed = r.socket ? this.#freedAt.get(r.socket) : undefined;
        const reused =
          r.reusedSocket && freed !== undefined
            ? ` (a reused keep-alive socket, idle ${((performance.now() - freed) / 1000).toFixed(1)} s)`
            : "";
        reject(new RequestFailure(`socket: ${err.code ?? ""} ${err.message}${reused}`.trim(), undefined));
      });
      r.end(body);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}

export interface Machine {
  readonly name: string;
  token?: string;
}

export const PHASES = ["fetching", "decrypted", "written", "running", "succeeded"] as const;

/** What differs between targets: the requests of each step. */
export interface Protocol {
  /** Publishes the machine's config; returns the machine's own token. */
  publish(c: HttpClient, m: Machine): Promise<string>;
  fetch(c: HttpClient, m: Machine, token: string): Promise<Answer>;
  status(c: HttpClient, m: Machine, token: string, phase: (typeof PHASES)[number]): Promise<void>;
  /** Why a fetched answer is not the machine's real config; undefined when it is. */
  verify(m: Machine, answer: Answer): string | undefined;
}

export interface Failure {
  readonly kind: Kind;
  readonly machine: string;
  readonly status: number | undefined;
  readonly message: string;
}

export interface PhaseRun {
  readonly seconds: number;
  readonly requests: number;
}

export interface Recorder {
  readonly latencies: Record<Kind, number[]>;
  /** A closed-loop storm's fetch latencies again: its first wave (the machines started at once), the rest. */
  readonly fetchByWave: { readonly first: number[]; readonly rest: number[] };
  readonly failures: Failure[];
  verified: number;
}

export function newRecorder(): Recorder {
  return {
    latencies: { publish: [], fetch: [], status: [] },
    fetchByWave: { first: [], rest: [] },
    failures: [],
    verified: 0,
  };
}

/**
 * Runs `fn` over 0..count-1 with `n` workers; stops taking work once `signal` aborts. With
 * `perSecond`, item i starts no earlier than i / perSecond seconds after the first (an open
 * loop at that rate, as long as n workers suffice).
 */
async function pool(
  n: number,
  count: number,
  signal: AbortSignal,
  fn: (i: number) => Promise<void>,
  perSecond?: number,
) {
  let next = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (next < count && !signal.aborted) {
      const i = next++;
      const wait = perSecond === undefined ? 0 : t0 + (i * 1000) / perSecond - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      await fn(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, count) }, worker));
}

async function timed<T>(
  rec: Recorder,
  kind: Kind,
  machine: string,
  step: () => Promise<T>,
  alsoInto?: number[],
): Promise<T | undefined> {
  const t0 = performance.now();
  try {
    const out = await step();
    const ms = performance.now() - t0;
    rec.latencies[kind].push(ms);
    alsoInto?.push(ms);
    return out;
  } catch (err) {
    const status = err instanceof RequestFailure ? err.status : undefined;
    rec.failures.push({ kind, machine, status, message: (err as Error).message });
    return undefined;
  }
}

/** Phase 1: publishes every machine, `concurrency` at once; sets each machine's token. */
export async function publishAll(
  c: HttpClient,
  p: Protocol,
  machines: Machine[],
  concurrency: number,
  rec: Recorder,
  signal: AbortSignal,
): Promise<PhaseRun> {
  const r0 = c.requests;
  const t0 = performance.now();
  await pool(concurrency, machines.length, signal, async (i) => {
    const m = machines[i] as Machine;
    const token = await timed(rec, "publish", m.name, () => p.publish(c, m));
    if (token !== undefined) m.token = token;
  });
  return { seconds: (performance.now() - t0) / 1000, requests: c.requests - r0 };
}

/**
 * The security property every target must have: machine a's token cannot read machine b's
 * config. Returns the failure to record when it could, undefined when it was refused (401/403).
 */
export async function crossTokenCheck(
  c: HttpClient,
  p: Protocol,
  a: Machine | undefined,
  b: Machine | undefined,
): Promise<Failure | undefined> {
  if (a?.token === undefined || b?.token === undefined) return undefined;
  try {
    await p.fetch(c, b, a.token);
    return {
      kind: "fetch",
      machine: b.name,
      status: 200,
      message: `${a.name}'s token read ${b.name}'s config`,
    };
  } catch (err) {
    const status = err instanceof RequestFailure ? err.status : undefined;
    if (status === 401 || status === 403) return undefined;
    return {
      kind: "fetch",
      machine: b.name,
      status,
      message: `cross-machine fetch: ${(err as Error).message}`,
    };
  }
}

/**
 * Phase 2, the storm: per machine one fetch then the five status posts in order, `concurrency`
 * machines in flight. Every `verifyEvery`-th machine's fetched body is checked. A machine whose
 * publish failed is skipped (that failure is already recorded).
 */
export async function storm(
  c: HttpClient,
  p: Protocol,
  machines: readonly Machine[],
  concurrency: number,
  verifyEvery: number,
  rec: Recorder,
  signal: AbortSignal,
  /** Machines started per second (open loop); default: the next as soon as one is done. */
  perSecond?: number,
): Promise<PhaseRun> {
  const r0 = c.requests;
  const t0 = performance.now();
  await pool(
    concurrency,
    machines.length,
    signal,
    async (i) => {
      const m = machines[i] as Machine;
      const token = m.token;
      if (token === undefined) return;
      const wave = perSecond === undefined ? rec.fetchByWave[i < concurrency ? "first" : "rest"] : undefined;
      const answer = await timed(rec, "fetch", m.name, () => p.fetch(c, m, token), wave);
      if (answer === undefined) return;
      if (i % verifyEvery === 0) {
        const wrong = p.verify(m, answer);
        if (wrong)
          rec.failures.push({ kind: "fetch", machine: m.name, status: answer.status, message: wrong });
        else rec.verified++;
      }
      for (const phase of PHASES) {
        const ok = await timed(rec, "status", m.name, () => p.status(c, m, token, phase).then(() => true));
        if (!ok) return;
      }
    },
    perSecond,
  );
  return { seconds: (performance.now() - t0) / 1000, requests: c.requests - r0 };
}
