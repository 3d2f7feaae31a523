/**
 * What a controller may do: the grants of its credential (`scopes` in `namespaces`, from the
 * configuration), compiled once per configuration load. A route asks for scopes in the
 * namespace of the machine it names; list routes ask which namespaces a caller may see.
 * `admin` implies every scope, in the namespaces of its grant only.
 */
import type { Grant, Scope } from "../../config/service-config.ts";

/** `team-*` -> /^team-[-a-z0-9]*$/: `*` is any run of label characters, the rest is literal. */
function namespaceMatcher(pattern: string): (namespace: string) => boolean {
  if (pattern === "*") return () => true;
  if (!pattern.includes("*")) return (namespace) => namespace === pattern;
  // The schema allows only [-a-z0-9*], so no other character needs escaping.
  const re = new RegExp(`^${pattern.replaceAll("*", "[-a-z0-9]*")}$`);
  return (namespace) => re.test(namespace);
}

interface CompiledGrant {
  readonly scopes: ReadonlySet<Scope>;
  readonly matches: (namespace: string) => boolean;
}

export class Policies {
  readonly #grants: readonly CompiledGrant[];

  constructor(grants: readonly Grant[]) {
    this.#grants = grants.map((g) => {
      const matchers = (g.namespaces ?? ["*"]).map(namespaceMatcher);
      return { scopes: new Set(g.scopes), matches: (ns: string) => matchers.some((m) => m(ns)) };
    });
  }

  /** True when one of the grants gives `scope` (or admin) in `namespace`. */
  allows(scope: Scope, namespace: string): boolean {
    return this.#grants.some((g) => (g.scopes.has(scope) || g.scopes.has("admin")) && g.matches(namespace));
  }

  /** The first of `scopes` not granted in `namespace`, or undefined when all are. */
  missing(scopes: readonly Scope[], namespace: string): Scope | undefined {
    return scopes.find((s) => !this.allows(s, namespace));
  }

  /** The first of `scopes` granted in no namespace at all (a list route cannot show anything). */
  missingEverywhere(scopes: readonly Scope[]): Scope | undefined {
    return scopes.find((s) => !this.#grants.some((g) => g.scopes.has(s) || g.scopes.has("admin")));
  }

  /** The namespaces in which every one of `scopes` is granted, as a test. */
  namespaceFilter(scopes: readonly Scope[]): (namespace: string) => boolean {
    return (namespace) => this.missing(scopes, namespace) === undefined;
  }
}
