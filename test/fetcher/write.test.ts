import assert from "node:assert/strict";
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { parseManifest, parseMode } from "../../src/fetcher/apply-manifest.ts";
import { loadAccounts, resolveOwnership } from "../../src/fetcher/owners.ts";
import {
  DEFAULT_ALLOWED_ROOTS,
  type PathPolicy,
  parseAllowedRoots,
  resolveTarget,
  rootDirectory,
} from "../../src/fetcher/paths.ts";
import { commandLabeler } from "../../src/fetcher/selinux.ts";
import { writeFileAtomic, writeResolved } from "../../src/files/atomic-write.ts";

const temps: string[] = [];
after(async () => {
  for (const t of temps) await rm(t, { recursive: true, force: true });
});

async function tempRoot(): Promise<PathPolicy> {
  const dir = await mkdtemp(join(tmpdir(), "bootseal-write-"));
  temps.push(dir);
  return { root: await rootDirectory(dir), allowedRoots: DEFAULT_ALLOWED_ROOTS };
}

const bytes = (s: string) => new TextEncoder().encode(s);

test("a path under an allowed root: directories created, file 0600, atomic, no temp left", async () => {
  const policy = await tempRoot();
  const target = await resolveTarget("/etc/kubernetes/pki/ca.crt", policy);
  assert.equal(target.hostPath, join(policy.root, "etc/kubernetes/pki/ca.crt"));
  assert.equal(target.missingDirs.length, 3);
  await writeResolved(target, bytes("CA"));
  assert.equal(await readFile(target.hostPath, "utf8"), "CA");
  assert.equal((await stat(target.hostPath)).mode & 0o777, 0o600);
  assert.equal((await stat(join(policy.root, "etc/kubernetes"))).mode & 0o777, 0o755);
  // replace: new mode and owner applied, still no temp file beside it
  const again = await resolveTarget("/etc/kubernetes/pki/ca.crt", policy);
  assert.ok(again.existing?.isFile());
  await writeResolved(again, bytes("CA2"), { mode: 0o640, uid: 1234, gid: 2345 });
  const info = await stat(target.hostPath);
  assert.equal(info.mode & 0o777, 0o640);
  assert.equal(info.uid, 1234);
  assert.equal(info.gid, 2345);
  assert.deepEqual(await readdir(join(policy.root, "etc/kubernetes/pki")), ["ca.crt"]);
});

test("outside the allowed roots, relative, '..' and '.' are refused", async () => {
  const policy = await tempRoot();
  for (const p of ["/usr/bin/kubelet", "/root/.ssh/authorized_keys", "/etcetera/x", "/", "/etc"]) {
    await assert.rejects(resolveTarget(p, policy), { code: "PATH_NOT_ALLOWED" }, p);
  }
  for (const p of ["etc/x", "/etc/../usr/x", "/etc/./x", "/etc/a\0b"]) {
    await assert.rejects(resolveTarget(p, policy), { code: "PATH_NOT_ALLOWED" }, JSON.stringify(p));
  }
  const custom = { ...policy, allowedRoots: parseAllowedRoots("/srv/, /etc/bootseal") };
  assert.deepEqual(custom.allowedRoots, ["/srv", "/etc/bootseal"]);
  await resolveTarget("/srv/x", custom);
  await assert.rejects(resolveTarget("/etc/hosts", custom), { code: "PATH_NOT_ALLOWED" });
});

test("symlink tricks: out of the allowed roots, above --root, the file itself a link", async () => {
  const policy = await tempRoot();
  const r = policy.root;
  await mkdir(join(r, "etc"), { recursive: true });
  await mkdir(join(r, "usr/bin"), { recursive: true });
  await mkdir(join(r, "var/lib"), { recursive: true });
  // /etc/evil -> /usr/bin (absolute, so relative to --root): leaves the allowed roots
  await symlink("/usr/bin", join(r, "etc/evil"));
  await assert.rejects(resolveTarget("/etc/evil/kubelet", policy), {
    code: "PATH_NOT_ALLOWED",
    message: /symbolic link leads to \/usr\/bin\/kubelet/,
  });
  // /etc/up -> ../../../.. climbs above --root
  await symlink("../../../../..", join(r, "etc/up"));
  await assert.rejects(resolveTarget("/etc/up/tmp/x", policy), {
    code: "PATH_NOT_ALLOWED",
    message: /above --root/,
  });
  // a link to a host directory by absolute path stays inside --root: /tmp under the root
  await symlink(tmpdir(), join(r, "etc/hosttmp"));
  await assert.rejects(resolveTarget("/etc/hosttmp/x", policy), { code: "PATH_NOT_ALLOWED" });
  // the file itself is a link
  await writeFile(join(r, "var/lib/real"), "x");
  await symlink("/var/lib/real", join(r, "etc/link"));
  await assert.rejects(resolveTarget("/etc/link", policy), {
    code: "PATH_NOT_ALLOWED",
    message: /is a symbolic link/,
  });
  // a file in the way of a directory
  await assert.rejects(resolveTarget("/var/lib/real/x", policy), {
    code: "PATH_NOT_ALLOWED",
    message: /not a directory/,
  });
  // a link that stays within the allowed roots is followed
  await symlink("../var/lib", join(r, "etc/state"));
  const ok = await resolveTarget("/etc/state/bootseal/x", policy);
  assert.equal(ok.logical, "/var/lib/bootseal/x");
  assert.equal(ok.hostPath, join(r, "var/lib/bootseal/x"));
  // an existing directory as the target
  await assert.rejects(resolveTarget("/var/lib", policy), { code: "PATH_NOT_ALLOWED" });
});

test("the write refuses a directory swapped for a link after the check", async () => {
  const policy = await tempRoot();
  const target = await resolveTarget("/etc/app/conf", policy);
  await mkdir(join(policy.root, "etc"), { recursive: true });
  await mkdir(join(policy.root, "elsewhere"));
  await symlink(join(policy.root, "elsewhere"), join(policy.root, "etc/app"));
  await assert.rejects(writeResolved(target, bytes("x")), { code: "PATH_NOT_ALLOWED" });
  assert.deepEqual(await readdir(join(policy.root, "elsewhere")), []);
});

test("writeFileAtomic never follows a link at its temporary name and cleans up on failure", async () => {
  const policy = await tempRoot();
  const dir = join(policy.root, "d");
  await mkdir(dir);
  await assert.rejects(writeFileAtomic(join(dir, "missing/x"), bytes("x")), { code: "IO_ERROR" });
  await writeFileAtomic(join(dir, "f"), bytes("x"), { mode: 0o644 });
  assert.equal((await lstat(join(dir, "f"))).mode & 0o777, 0o644);
  assert.deepEqual(await readdir(dir), ["f"]);
});

test("SELinux labels: chcon --reference of the file replaced, or of the directory", async () => {
  const calls: string[][] = [];
  const labeler = commandLabeler(async (file, args) => {
    calls.push([file, ...args]);
    return "";
  });
  const policy = await tempRoot();
  const target = await resolveTarget("/etc/x.conf", policy);
  await writeResolved(target, bytes("1"), { labeler });
  await writeResolved(await resolveTarget("/etc/x.conf", policy), bytes("2"), { labeler });
  assert.equal(calls.length, 2);
  assert.equal(calls[0]![0], "chcon");
  assert.equal(calls[0]![1], `--reference=${join(policy.root, "etc")}`);
  assert.equal(calls[1]![1], `--reference=${join(policy.root, "etc/x.conf")}`);
  assert.match(calls[1]![3]!, /\.x\.conf\.bootseal-[0-9a-f]+\.tmp$/);

  // no chcon: getfattr + setfattr on security.selinux
  const calls2: string[][] = [];
  const fallback = commandLabeler(async (file, args) => {
    calls2.push([file, ...args]);
    if (file === "chcon") throw Object.assign(new Error("not found"), { code: "ENOENT" });
    return file === "getfattr" ? "system_u:object_r:etc_t:s0\0" : "";
  });
  await writeResolved(await resolveTarget("/etc/y.conf", policy), bytes("3"), { labeler: fallback });
  assert.deepEqual(
    calls2.map((c) => c[0]),
    ["chcon", "getfattr", "setfattr"],
  );
  assert.deepEqual(calls2[2]!.slice(1, 5), ["-n", "security.selinux", "-v", "system_u:object_r:etc_t:s0"]);
  // a failing label fails the write, and nothing is left behind
  const broken = commandLabeler(async () => {
    throw new Error("denied");
  });
  await assert.rejects(
    writeResolved(await resolveTarget("/etc/z.conf", policy), bytes("4"), { labeler: broken }),
    {
      code: "IO_ERROR",
    },
  );
  assert.deepEqual((await readdir(join(policy.root, "etc"))).sort(), ["x.conf", "y.conf"]);
});

test("manifest: multi-document, encodings, octal modes from the source digits, owners", () => {
  const specs = parseManifest(
    bytes(
      [
        "path: /etc/a",
        "content: hello",
        "---",
        "path: /etc/b",
        "content: aGk=",
        "encoding: base64",
        "mode: 0640",
        "owner: root",
        "---",
        "path: /etc/c",
        'content: ""',
        'mode: "755"',
        "group: '0'",
        "---",
        "path: /etc/d",
        "content: x",
        "mode: 0o444",
        "---",
        "",
      ].join("\n"),
    ),
  );
  assert.equal(specs.length, 4);
  assert.equal(new TextDecoder().decode(specs[0]!.content), "hello");
  assert.equal(specs[0]!.mode, 0o600);
  assert.equal(new TextDecoder().decode(specs[1]!.content), "hi");
  assert.equal(specs[1]!.mode, 0o640);
  assert.equal(specs[1]!.owner, "root");
  assert.equal(specs[2]!.mode, 0o755);
  assert.equal(specs[2]!.group, "0");
  assert.equal(specs[3]!.mode, 0o444);
  assert.equal(parseMode("600", "x"), 0o600);
  assert.throws(() => parseMode("0999", "x"), /not an octal mode/);
});

test("manifest refusals name the document and key, never the content", () => {
  const cases: Array<[string, RegExp]> = [
    ["path: /etc/a\ncontent: SECRET\npermissions: 0600\n", /key 3 of 3 is an unknown key/],
    ["content: SECRET\n", /path is missing/],
    ["path: /etc/a\n", /content is missing/],
    ["path: /etc/a\ncontent: SECRET\nencoding: hex\n", /encoding must be plain or base64/],
    ["path: /etc/a\ncontent: SECRET!\nencoding: base64\n", /not valid base64/],
    ["path: /etc/a\ncontent: SECRET\nmode: 0800\n", /not an octal mode/],
    ["path: /etc/a\ncontent: SECRET\n---\npath: /etc/a\ncontent: SECRET\n", /appears twice/],
    ["- SECRET\n", /must be a mapping/],
    ["path: /etc/a\ncontent: [SECRET\n", /YAML error/],
    ["", /lists no files/],
  ];
  for (const [text, re] of cases) {
    assert.throws(
      () => parseManifest(bytes(text)),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, "BAD_INPUT");
        assert.match(err.message, re);
        assert.ok(!err.message.includes("SECRET"), `no content in: ${err.message}`);
        return true;
      },
    );
  }
});

test("owners: names from <root>/etc/passwd and group, numbers as they are", async () => {
  const policy = await tempRoot();
  await mkdir(join(policy.root, "etc"));
  await writeFile(
    join(policy.root, "etc/passwd"),
    "root:x:0:0::/root:/bin/sh\nkube:x:901:902::/:/sbin/nologin\n",
  );
  await writeFile(join(policy.root, "etc/group"), "root:x:0:\nkube:x:902:\netcd:x:903:\n");
  const accounts = await loadAccounts(policy.root);
  assert.deepEqual(resolveOwnership("kube", undefined, accounts, "p"), { uid: 901, gid: 902 });
  assert.deepEqual(resolveOwnership("kube", "etcd", accounts, "p"), { uid: 901, gid: 903 });
  assert.deepEqual(resolveOwnership("77", "88", accounts, "p"), { uid: 77, gid: 88 });
  assert.deepEqual(resolveOwnership(undefined, undefined, accounts, "p"), {});
  assert.throws(
    () => resolveOwnership("nobody-here", undefined, accounts, "/etc/x"),
    /unknown user "nobody-here"/,
  );
  assert.throws(() => resolveOwnership(undefined, "nogroup-here", accounts, "/etc/x"), /unknown group/);
});
