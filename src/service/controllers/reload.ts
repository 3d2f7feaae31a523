/**
 * Reloading the controller credentials without a restart: on SIGHUP, and when the config
 * file changes (its directory is watched, so an editor's rename-into-place and a Kubernetes
 * ConfigMap's symlink swap are both seen; events are debounced and a file whose bytes did not
 * change is not reloaded). The whole configuration is read and validated again; a file that
 * fails is logged and the credentials in force are kept. Only the controller keys change
 * live: every other changed key is named in a warning, as needing a restart.
 */
import { createHash } from "node:crypto";
import { type FSWatcher, readFileSync, watch } from "node:fs";
import { basename, dirname } from "node:path";
import type { FastifyBaseLogger } from "fastify";
import type { ServiceConfig } from "../../config/service-config.ts";
import { BootsealError } from "../../errors.ts";
import type { ControllerCredentials } from "./credentials.ts";

/** The keys that reload live; everything else is read once at start. */
export const LIVE_KEYS = ["controllers", "kubernetesBindings", "controllerAuth"] as const;

/** Quiet time after the last file event before reloading (editors write in several steps). */
export const RELOAD_DEBOUNCE_MS = 250;

export interface ReloadOptions {
  /** The config file to watch; undefined: SIGHUP only. */
  readonly file: string | undefined;
  /** Reads and validates the whole configuration again (file, variables, flags). */
  readonly load: () => ServiceConfig;
  readonly running: ServiceConfig;
  readonly controllers: ControllerCredentials;
  readonly log: FastifyBaseLogger;
}

export interface Reloader {
  /** Reloads now; false when the new configuration was refused (the old one stays). */
  reload(reason: string): boolean;
  close(): void;
}

function digestOf(file: string): string | undefined {
  try {
    return createHash("sha256").update(readFileSync(file)).digest("hex");
  } catch {
    return undefined; // mid-replace: the next event or SIGHUP reads it
  }
}

/** Top-level keys, other than the live ones, whose value differs. */
function restartKeys(a: ServiceConfig, b: ServiceConfig): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].filter(
    (k) =>
      !(LIVE_KEYS as readonly string[]).includes(k) &&
      JSON.stringify(a[k as keyof ServiceConfig]) !== JSON.stringify(b[k as keyof ServiceConfig]),
  );
}

export function watchControllerConfig(options: ReloadOptions): Reloader {
  const { file, log, controllers } = options;
  const started = options.running;
  let digest = file ? digestOf(file) : undefined;
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;

  function reload(reason: string): boolean {
    let next: ServiceConfig;
    try {
      next = options.load();
    } catch (err) {
      const code = err instanceof BootsealError ? err.code : "INTERNAL";
      const message = err instanceof BootsealError ? err.message : "the configuration could not be read";
      log.error({ reason, code, error: message }, "config reload refused: the controllers in force are kept");
      return false;
    }
    controllers.update(next);
    const restart = restartKeys(started, next);
    log.info(
      { reason, controllers: controllers.names, kubernetesBindings: next.kubernetesBindings.length },
      "controllers reloaded",
    );
    if (restart.length > 0)
      log.warn({ keys: restart }, "config reload: these keys changed and need a restart to apply");
    return true;
  }

  const onSignal = () => {
    if (file) digest = digestOf(file);
    reload("SIGHUP");
  };
  process.on("SIGHUP", onSignal);

  if (file) {
    const name = basename(file);
    try {
      watcher = watch(dirname(file), { persistent: false }, (_event, changed) => {
        // A ConfigMap swaps its `..data` symlink: any event in the directory may be ours.
        if (changed !== null && changed !== name && !String(changed).startsWith("..")) return;
        clearTimeout(timer);
        timer = setTimeout(() => {
          const now = digestOf(file);
          if (now === undefined || now === digest) return;
          digest = now;
          reload("file changed");
        }, RELOAD_DEBOUNCE_MS);
        timer.unref();
      });
      watcher.on("error", (err) =>
        log.warn({ error: err.message }, "config file watch stopped; SIGHUP still reloads"),
      );
    } catch (err) {
      log.warn({ error: (err as Error).message }, "cannot watch the config file; SIGHUP still reloads");
    }
  }

  return {
    reload,
    close() {
      process.off("SIGHUP", onSignal);
      clearTimeout(timer);
      watcher?.close();
    },
  };
}
