/**
 * The `spiffe` login method, machine side: a JWT-SVID for the service's audience, read from a
 * file that the machine's SPIFFE agent tooling keeps fresh (for example spiffe-helper's
 * `jwt_svids`, or `spire-agent api fetch jwt -audience AUD` in a unit before the fetch). The
 * file is read again at every attempt, so a renewed SVID is picked up; until it exists the
 * login is retried (the agent may still be attesting). The Workload API socket itself is not
 * spoken here: that is gRPC, and a file keeps the fetcher free of it.
 *
 * The file: `--spiffe-jwt-file`, else `BOOTSEAL_SPIFFE_JWT_FILE`, else SPIFFE_JWT_DEFAULT_FILE;
 * like --token-file it must be readable by its owner only. docs/fetcher.md, docs/security.md.
 */
import { stat } from "node:fs/promises";
import { BootsealError } from "../../errors.ts";
import { readTokenFile } from "../../files/token-file.ts";
import type { CredentialContext, IdentityProvider } from "./provider.ts";

export const SPIFFE_JWT_DEFAULT_FILE = "/run/bootseal/jwt-svid";
const FLAG = "--spiffe-jwt-file";

export interface SpiffeProviderOptions {
  /** `--spiffe-jwt-file`; before BOOTSEAL_SPIFFE_JWT_FILE and the default. */
  readonly jwtFile?: string | undefined;
}

export function spiffeProvider(options: SpiffeProviderOptions = {}): IdentityProvider {
  return {
    method: "spiffe",
    async credential(ctx: CredentialContext): Promise<string> {
      ctx.signal?.throwIfAborted();
      const path = options.jwtFile || ctx.env.BOOTSEAL_SPIFFE_JWT_FILE || SPIFFE_JWT_DEFAULT_FILE;
      try {
        await stat(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") {
          // Retried: the agent tooling may not have written it yet.
          throw new BootsealError("KEY_UNAVAILABLE", `${FLAG} ${path}: no JWT-SVID there (yet)`);
        }
      }
      return readTokenFile(path, FLAG);
    },
  };
}
