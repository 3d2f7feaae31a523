/**
 * The controller credentials the service accepts right now: static tokens (by SHA-256),
 * certificate names (mutual TLS), and Kubernetes ServiceAccounts through their bindings,
 * each mapped to its Policies. One object per app, swapped whole by `update` when the
 * configuration is reloaded (reload.ts): a request sees the old set or the new one, never a mix.
 */
import type { Grant, KubernetesReview, ServiceConfig } from "../../config/service-config.ts";
import { BootsealError } from "../../errors.ts";
import { digestsEqual, sha256Hex } from "../tokens.ts";
import { Policies } from "./policies.ts";
import { kubernetesReviewer, looksLikeJwt, type TokenReviewer } from "./token-review.ts";

/** The part of the configuration that reloads without a restart. */
export type ControllerSettings = Pick<ServiceConfig, "controllers" | "kubernetesBindings" | "controllerAuth">;

export interface ControllerIdentity {
  /** For the audit log: the configured name, or `system:serviceaccount:NS:NAME`. */
  readonly name: string;
  readonly policies: Policies;
}

export type ReviewerFactory = (settings: KubernetesReview) => TokenReviewer;

interface Loaded {
  readonly tokens: readonly { readonly sha256: string; readonly identity: ControllerIdentity }[];
  readonly byName: ReadonlyMap<string, ControllerIdentity>;
  readonly bindings: readonly { readonly serviceAccount: string; readonly grant: Grant }[];
  readonly kubernetes?: { readonly key: string; readonly reviewer: TokenReviewer };
}

const SERVICE_ACCOUNT_USER = /^system:serviceaccount:([^:]+):([^:]+)$/;

export class ControllerCredentials {
  #loaded: Loaded;
  readonly #reviewerFor: ReviewerFactory;

  constructor(
    settings: ControllerSettings,
    options: { now?: () => number; reviewer?: ReviewerFactory } = {},
  ) {
    const now = options.now ?? Date.now;
    this.#reviewerFor = options.reviewer ?? ((k) => kubernetesReviewer(k, now));
    this.#loaded = this.#load(settings, undefined);
  }

  /** Replaces every controller credential at once (a reload). */
  update(settings: ControllerSettings): void {
    this.#loaded = this.#load(settings, this.#loaded);
  }

  #load(settings: ControllerSettings, previous: Loaded | undefined): Loaded {
    const byName = new Map<string, ControllerIdentity>();
    const tokens: { sha256: string; identity: ControllerIdentity }[] = [];
    for (const c of settings.controllers) {
      const identity = { name: c.name, policies: new Policies([c]) };
      byName.set(c.name, identity);
      if (c.tokenSha256) tokens.push({ sha256: c.tokenSha256, identity });
    }
    const bindings = settings.kubernetesBindings.map((b) => ({ serviceAccount: b.serviceAccount, grant: b }));
    const k = settings.controllerAuth.kubernetes;
    if (!k) return { tokens, byName, bindings };
    // The same API server settings keep the reviewer, and with it its cache of reviews.
    const key = JSON.stringify(k);
    const reviewer = previous?.kubernetes?.key === key ? previous.kubernetes.reviewer : this.#reviewerFor(k);
    return { tokens, byName, bindings, kubernetes: { key, reviewer } };
  }

  get names(): string[] {
    return [...this.#loaded.byName.keys()];
  }

  /** A static token's controller. Every hash is compared, so timing says nothing about the list. */
  byToken(token: string): ControllerIdentity | undefined {
    const digest = sha256Hex(token);
    let found: ControllerIdentity | undefined;
    for (const t of this.#loaded.tokens) {
      if (digestsEqual(t.sha256, digest) && !found) found = t.identity;
    }
    return found;
  }

  /** The controller a verified client certificate's CN names. */
  byCertificateName(name: string): ControllerIdentity | undefined {
    return this.#loaded.byName.get(name);
  }

  /** True when a bearer token that is no static token should be reviewed by Kubernetes. */
  reviews(token: string): boolean {
    return this.#loaded.kubernetes !== undefined && looksLikeJwt(token);
  }

  /**
   * A ServiceAccount token: reviewed by the API server, then mapped through the bindings in
   * force when the answer came. UNAUTHORIZED: not a valid token; FORBIDDEN: valid, but no
   * binding names its ServiceAccount; KEY_UNAVAILABLE: the API server cannot be asked.
   */
  async byServiceAccountToken(token: string): Promise<ControllerIdentity> {
    const reviewer = this.#loaded.kubernetes?.reviewer;
    if (!reviewer) throw new BootsealError("UNAUTHORIZED", "unknown bearer token");
    const { username } = await reviewer.review(token);
    const m = SERVICE_ACCOUNT_USER.exec(username);
    if (!m) throw new BootsealError("FORBIDDEN", "the token is not a Kubernetes ServiceAccount's");
    const [, namespace, name] = m as unknown as [string, string, string];
    const grants = this.#loaded.bindings
      .filter((b) => b.serviceAccount === `${namespace}/${name}` || b.serviceAccount === `${namespace}/*`)
      .map((b) => b.grant);
    if (grants.length === 0)
      throw new BootsealError(
        "FORBIDDEN",
        `ServiceAccount ${namespace}/${name} has no kubernetesBindings entry`,
      );
    return { name: username, policies: new Policies(grants) };
  }
}
