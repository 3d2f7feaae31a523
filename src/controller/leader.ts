/**
 * Leader election on a coordination.k8s.io Lease (`bootseal-controller`), the way client-go's
 * leaderelection does it: take the lease when it is free or its holder stopped renewing for
 * leaseDuration, renew every retryPeriod, and give up leadership (the caller exits) when a
 * renewal has not succeeded for renewDeadline. Conflicts (409) mean someone else won the race.
 */
import { type V1Lease, V1MicroTime } from "@kubernetes/client-node";
import type { Kube } from "./kube.ts";
import type { Log } from "./reconciler.ts";

export const LEASE_NAME = "bootseal-controller";

export interface LeaderOptions {
  readonly namespace: string;
  readonly identity: string;
  readonly leaseDurationMs?: number;
  readonly renewDeadlineMs?: number;
  readonly retryPeriodMs?: number;
}

const status = (err: unknown) => (err as { code?: number }).code ?? 0;
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });

export class LeaderElector {
  readonly #kube: Kube;
  readonly #o: Required<LeaderOptions>;
  readonly #log: Log;

  constructor(kube: Kube, opts: LeaderOptions, log: Log) {
    this.#kube = kube;
    this.#o = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...opts };
    this.#log = log;
  }

  /** One attempt to take or renew the lease; true when we hold it afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, identity, leaseDurationMs } = this.#o;
    const api = this.#kube.coordination;
    const now = new V1MicroTime(Date.now());
    let lease: V1Lease;
    try {
      lease = await api.readNamespacedLease({ name: LEASE_NAME, namespace });
    } catch (err) {
      if (status(err) !== 404) throw err;
      try {
        await api.createNamespacedLease({
          namespace,
          body: {
            metadata: { name: LEASE_NAME, namespace },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
              acquireTime: now,
              renewTime: now,
              leaseTransitions: 0,
            },
          },
        });
        return true;
      } catch (e) {
        if (status(e) === 409) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const mine = spec.holderIdentity === identity;
    const renewed = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
    const duration = (spec.leaseDurationSeconds ?? Math.ceil(leaseDurationMs / 1000)) * 1000;
    if (!mine && spec.holderIdentity && renewed + duration > Date.now()) return false;
    lease.spec = {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      renewTime: now,
      ...(mine ? {} : { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }),
    };
    try {
      await api.replaceNamespacedLease({ name: LEASE_NAME, namespace, body: lease });
      return true;
    } catch (err) {
      if (status(err) === 409) return false;
      throw err;
    }
  }

  /** Resolves once we lead (or `signal` aborts: false). */
  async acquire(signal: AbortSignal): Promise<boolean> {
    let logged = false;
    while (!signal.aborted) {
      try {
        if (await this.tryAcquireOrRenew()) {
          this.#log.info(
            { lease: `${this.#o.namespace}/${LEASE_NAME}`, identity: this.#o.identity },
            "leading",
          );
          return true;
        }
        if (!logged) this.#log.info({ lease: `${this.#o.namespace}/${LEASE_NAME}` }, "waiting for the lease");
        logged = true;
      } catch (err) {
        this.#log.warn({ code: status(err) }, "leader election: the lease cannot be read or written");
      }
      await sleep(this.#o.retryPeriodMs, signal);
    }
    return false;
  }

  /** Renews until `signal` aborts; calls `lost` once when renewals fail for renewDeadline. */
  async hold(signal: AbortSignal, lost: () => void): Promise<void> {
    let last = Date.now();
    while (!signal.aborted) {
      await sleep(this.#o.retryPeriodMs, signal);
      if (signal.aborted) break;
      try {
        if (await this.tryAcquireOrRenew()) last = Date.now();
      } catch {
        // counted against the deadline below
      }
      if (Date.now() - last > this.#o.renewDeadlineMs) {
        this.#log.error({ lease: `${this.#o.namespace}/${LEASE_NAME}` }, "lost the lease");
        lost();
        return;
      }
    }
  }

  /** On a clean stop: let the next replica take over at once. */
  async release(): Promise<void> {
    const api = this.#kube.coordination;
    try {
      const lease = await api.readNamespacedLease({ name: LEASE_NAME, namespace: this.#o.namespace });
      if (lease.spec?.holderIdentity !== this.#o.identity) return;
      lease.spec = { ...lease.spec, holderIdentity: "", renewTime: new V1MicroTime(0) };
      await api.replaceNamespacedLease({ name: LEASE_NAME, namespace: this.#o.namespace, body: lease });
    } catch {
      // the lease expires by itself
    }
  }
}
