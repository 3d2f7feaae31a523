/**
 * A small machine root for the Ignition tests (accounts, an existing file, link, directory,
 * unit and mask), a snapshot of a tree (type, mode, owner, bytes, link target, hard-link
 * groups) to compare two roots or a root before and after, and bootseal's apply with a
 * recording systemctl.
 */
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BootsealError } from "../../src/errors.ts";
import { applyIgnition, type IgnitionApplyContext } from "../../src/fetcher/payloads/ignition.ts";
import type { FileWriter } from "../../src/fetcher/write-plan.ts";

export function makeRoot(root: string): void {
  mkdirSync(join(root, "etc/systemd/system"), { recursive: true });
  mkdirSync(join(root, "var/lib"), { recursive: true });
  writeFileSync(join(root, "etc/passwd"), "root:x:0:0::/root:/bin/sh\ncore:x:500:500::/home/core:/bin/sh\n");
  writeFileSync(join(root, "etc/group"), "root:x:0:\ncore:x:500:\ndocker:x:233:core\n");
  writeFileSync(join(root, "etc/existing.conf"), "old\n", { mode: 0o600 });
  symlinkSync("/usr/share/zoneinfo/Etc/UTC", join(root, "etc/localtime"));
  mkdirSync(join(root, "etc/exdir"), { mode: 0o750 });
  writeFileSync(join(root, "etc/systemd/system/old.service"), "[Service]\nExecStart=/bin/true\n", {
    mode: 0o644,
  });
  symlinkSync("/dev/null", join(root, "etc/systemd/system/masked.service"));
}

export interface Node {
  readonly type: "file" | "dir" | "link";
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  readonly content?: string;
  readonly target?: string;
}

export interface Tree {
  readonly nodes: Record<string, Node>;
  /** Paths sharing an inode (hard links), each group sorted. */
  readonly hardLinks: string[][];
}

export function snapshot(root: string, skip: (path: string) => boolean = () => false): Tree {
  const nodes: Record<string, Node> = {};
  const inodes = new Map<number, string[]>();
  const walk = (rel: string): void => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const path = rel === "" ? name : `${rel}/${name}`;
      if (skip(path)) continue;
      const st = lstatSync(join(root, path));
      const base = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
      if (st.isSymbolicLink()) {
        nodes[path] = { type: "link", ...base, mode: 0, target: readlinkSync(join(root, path)) };
      } else if (st.isDirectory()) {
        nodes[path] = { type: "dir", ...base };
        walk(path);
      } else {
        nodes[path] = { type: "file", ...base, content: readFileSync(join(root, path)).toString("base64") };
        inodes.set(st.ino, [...(inodes.get(st.ino) ?? []), path]);
      }
    }
  };
  walk("");
  const hardLinks = [...inodes.values()].filter((g) => g.length > 1).map((g) => g.sort());
  return { nodes, hardLinks: hardLinks.sort((a, b) => (a[0] as string).localeCompare(b[0] as string)) };
}

export type Outcome =
  | {
      readonly ok: true;
      readonly calls: string[][];
      readonly written: readonly string[];
      readonly writesSentinel: boolean;
    }
  | { readonly ok: false; readonly code: string; readonly message: string };

export interface OursOptions {
  readonly allowedRoots?: readonly string[];
  readonly allowUnsafeModes?: boolean;
  readonly write?: FileWriter;
  readonly systemd?: IgnitionApplyContext["systemd"];
  readonly reserved?: IgnitionApplyContext["reserved"];
}

/** bootseal's apply of `config` under `root`; systemctl calls recorded, not run. */
export async function ours(
  root: string,
  config: string | Uint8Array,
  options: OursOptions = {},
): Promise<Outcome> {
  const calls: string[][] = [];
  const payload = typeof config === "string" ? new TextEncoder().encode(config) : config;
  try {
    const r = await applyIgnition(payload, {
      policy: { root: realpathSync(root), allowedRoots: options.allowedRoots ?? ["/"] },
      reserved: options.reserved ?? [],
      allowUnsafeModes: options.allowUnsafeModes ?? true,
      labeler: null,
      log: () => {},
      systemd: options.systemd ?? {
        run: async (args) => {
          calls.push([...args]);
        },
      },
      env: {},
      ...(options.write ? { write: options.write } : {}),
    });
    return { ok: true, calls, written: r.written, writesSentinel: r.writesSentinel };
  } catch (err) {
    if (!(err instanceof BootsealError)) throw err;
    return { ok: false, code: err.code, message: err.message };
  }
}

export function dataUrl(text: string | Uint8Array): string {
  return `data:;base64,${Buffer.from(text).toString("base64")}`;
}

/** A fresh temporary directory (no peer helper: the unit lane imports this module). */
export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `bootseal-${prefix}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
