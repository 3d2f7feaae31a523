/**
 * Ignition spec 2.x payloads (ignition-v2.ts): the 3.1.0 config each spec's forms translate to
 * (ign-converter's rules: overwrite by default, append, modes and owners of 2.0/2.1, enable and
 * enabled, networkd units as files), what the kubeadm provider's Flatcar config writes under a
 * root, and each refusal's code and message. ignition-v2-oracle.test.ts compares the writes
 * with Ignition's own ignition-apply on the translated configs.
 */
import assert from "node:assert/strict";
import { lstatSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { translateV2, type V2Config } from "../../src/fetcher/payloads/ignition-v2.ts";
import { makeRoot, ours, tempDir } from "./ignition-fixture.ts";
import { CABPK_FLATCAR, kubeadmUnit, V2_CASES } from "./ignition-v2-cases.ts";

async function applied(
  config: unknown,
): Promise<{ root: string; r: Awaited<ReturnType<typeof ours>>; remove: () => void }> {
  const { dir, remove } = tempDir("ign-v2");
  makeRoot(dir);
  const r = await ours(dir, JSON.stringify(config));
  return { root: dir, r, remove };
}

const files = (c: Record<string, unknown>) => (c.storage as { files: Record<string, unknown>[] }).files;

describe("Ignition 2.x: the translation to 3.1.0", () => {
  test("2.3.0 (the kubeadm provider's shape): overwrite true by default, sources kept, modes kept, units", () => {
    const out = translateV2(CABPK_FLATCAR as V2Config, 3);
    assert.equal((out.ignition as { version: string }).version, "3.1.0");
    const [sh, , , , existing, net, dropin] = files(out);
    assert.deepEqual(sh, {
      path: "/etc/kubeadm.sh",
      user: {},
      group: {},
      overwrite: true,
      mode: 448,
      contents: { source: CABPK_FLATCAR.storage.files[0]?.contents.source },
    });
    assert.deepEqual(existing, {
      path: "/etc/existing.conf",
      user: {},
      group: {},
      overwrite: true,
      contents: { source: "data:,replaced%0A" },
    });
    assert.equal(net?.path, "/etc/systemd/network/10-eth0.network");
    assert.equal(net?.mode, 0o644);
    assert.equal(net?.overwrite, true);
    assert.equal(dropin?.path, "/etc/systemd/network/10-eth0.network.d/10-mtu.conf");
    assert.deepEqual((out.systemd as { units: unknown[] }).units, [
      { name: "kubeadm.service", enabled: true, contents: kubeadmUnit },
      { name: "ntpd.service", enabled: true },
      {
        name: "containerd.service",
        dropins: [
          {
            name: "10-opts.conf",
            contents: "[Service]\nEnvironment=CONTAINERD_CONFIG=/etc/containerd/config.toml\n",
          },
        ],
      },
    ]);
  });

  test("2.0.0: absent mode is 0 and owners are ids (0 when absent); paths cleaned as path.Join does", () => {
    const c = V2_CASES[1]?.[1] as V2Config;
    const out = files(translateV2(c, 0));
    assert.equal(out[1]?.mode, 0);
    assert.deepEqual(out[1]?.user, { id: 0 });
    assert.deepEqual(out[2]?.user, { id: 500 });
    assert.equal(out[2]?.path, "/etc/v20/unclean");
    assert.deepEqual(out[3]?.contents, { source: "" }, "no contents: an empty source, an empty file");
    const units = (translateV2(c, 0).systemd as { units: Record<string, unknown>[] }).units;
    assert.equal(units[0]?.enabled, true, "enable: true");
    assert.deepEqual(units[1]?.dropins, [
      { name: "10-x.conf", contents: "[Unit]\n" },
      { name: "20-empty.conf" },
    ]);
  });

  test("2.1.0: a directory without mode gets 0; enabled false wins over enable true; names kept", () => {
    const c = V2_CASES[2]?.[1] as V2Config;
    const out = translateV2(c, 1);
    const dirs = (out.storage as { directories: Record<string, unknown>[] }).directories;
    assert.equal(dirs[1]?.mode, 0);
    assert.deepEqual(dirs[0]?.user, { name: "core" });
    const units = (out.systemd as { units: Record<string, unknown>[] }).units;
    assert.equal(units[0]?.enabled, false);
    assert.equal(units[2]?.mask, undefined, "mask false is no mask");
    const links = (out.storage as { links: Record<string, unknown>[] }).links;
    assert.equal(links[1]?.hard, true);
    assert.equal(links[0]?.overwrite, undefined, "links keep v3's default");
  });

  test("2.2.0: append becomes the one fragment with overwrite false; a mode stays absent when absent", () => {
    const out = files(translateV2(V2_CASES[3]?.[1] as V2Config, 2));
    assert.deepEqual(out[0], {
      path: "/etc/existing.conf",
      user: {},
      group: {},
      overwrite: false,
      append: [{ source: "data:,more%0A" }],
    });
    assert.equal(out[2]?.overwrite, false);
    assert.equal("mode" in (out[2] ?? {}), false);
    const net = out.find((f) => String(f.path).includes("network"));
    assert.equal(
      net?.path,
      "/etc/systemd/network/30-wlan.network.d/10-a.conf",
      "a unit without contents: drop-ins only",
    );
    assert.equal(
      net?.contents && (net.contents as { source: string }).source,
      "data:,%5BNetwork%5D%0ADHCP%3Dno%0A",
    );
  });
});

describe("Ignition 2.x: applied under a root", () => {
  test("the kubeadm provider's Flatcar config: bytes, modes, units, networkd files, systemctl calls", async () => {
    const { root, r, remove } = await applied(CABPK_FLATCAR);
    try {
      assert.ok(r.ok, JSON.stringify(r));
      const at = (p: string) => join(root, p);
      assert.equal(readFileSync(at("etc/kubeadm.sh"), "utf8").split("\n")[0], "#!/bin/bash");
      assert.equal(lstatSync(at("etc/kubeadm.sh")).mode & 0o7777, 0o700);
      assert.equal(readFileSync(at("etc/testfile.yaml"), "utf8"), "foo\n");
      assert.equal(lstatSync(at("etc/testfile.yaml")).mode & 0o7777, 0o600);
      assert.equal(lstatSync(at("etc/ntp.conf")).mode & 0o7777, 0o644);
      assert.equal(
        readFileSync(at("etc/existing.conf"), "utf8"),
        "replaced\n",
        "overwritten without overwrite: true",
      );
      assert.equal(readFileSync(at("etc/systemd/system/kubeadm.service"), "utf8"), kubeadmUnit);
      assert.match(
        readFileSync(at("etc/systemd/system/containerd.service.d/10-opts.conf"), "utf8"),
        /CONTAINERD_CONFIG/,
      );
      assert.equal(
        readFileSync(at("etc/systemd/network/10-eth0.network"), "utf8"),
        "[Match]\nName=eth0\n\n[Network]\nDHCP=yes\n",
      );
      assert.equal(lstatSync(at("etc/systemd/network/10-eth0.network")).mode & 0o7777, 0o644);
      assert.equal(
        readFileSync(at("etc/systemd/network/10-eth0.network.d/10-mtu.conf"), "utf8"),
        "[Link]\nMTUBytes=1450\n",
      );
      assert.ok(r.ok && r.writesSentinel === false, "the sentinel is the script's, not a file of the config");
      const enables = r.ok ? r.calls.filter((c) => c.includes("enable")) : [];
      assert.deepEqual(
        enables.map((c) => c.slice(c.indexOf("enable") + 1)),
        [["kubeadm.service", "ntpd.service"]],
      );
    } finally {
      remove();
    }
  });

  test("2.0.0 and 2.1.0: mode 0 files and directories, root-owned 2.0 files, links", async () => {
    for (const i of [1, 2]) {
      const { root, r, remove } = await applied(V2_CASES[i]?.[1]);
      try {
        assert.ok(r.ok, JSON.stringify(r));
        if (i === 1) {
          assert.equal(lstatSync(join(root, "etc/v20/no-mode")).mode & 0o7777, 0);
          assert.equal(lstatSync(join(root, "etc/v20/empty")).size, 0);
          assert.equal(lstatSync(join(root, "etc/v20/unclean")).uid, 500);
          assert.equal(
            readFileSync(join(root, "etc/systemd/network/20-lan.netdev"), "utf8"),
            "[NetDev]\nName=br0\nKind=bridge\n",
          );
        } else {
          assert.equal(lstatSync(join(root, "etc/v21/no-mode")).mode & 0o7777, 0);
          assert.equal(readlinkSync(join(root, "etc/v21/sym")), "/etc/v21/f");
          assert.equal(lstatSync(join(root, "etc/v21/hard")).ino, lstatSync(join(root, "etc/v21/f")).ino);
        }
      } finally {
        remove();
      }
    }
  });

  for (const [name, config, want] of V2_CASES) {
    test(`outcome: ${name} -> ${want}`, async () => {
      const { r, remove } = await applied(config);
      remove();
      assert.equal(r.ok ? "ok" : r.code, want, JSON.stringify(r));
    });
  }
});

describe("Ignition 2.x: versions and messages", () => {
  const cases: [string, unknown, string, RegExp][] = [
    [
      "an experimental 2.x spec",
      { ignition: { version: "2.3.0-experimental" } },
      "BAD_INPUT",
      /experimental/,
    ],
    ["a spec after 2.4", { ignition: { version: "2.5.0" } }, "UNSUPPORTED", /2\.0\.0 to 2\.4\.0/],
    [
      "another filesystem",
      V2_CASES[6]?.[1],
      "UNSUPPORTED",
      /storage\.files\[0\]: the filesystem "oem" is not root/,
    ],
    ["no filesystem", V2_CASES[8]?.[1], "BAD_INPUT", /storage\.files\[0\]\.filesystem is missing/],
    ["append and overwrite", V2_CASES[10]?.[1], "BAD_INPUT", /append and overwrite cannot both be true/],
    ["sha256", V2_CASES[11]?.[1], "BAD_INPUT", /sha512 only/],
    [
      "a networkd name",
      V2_CASES[12]?.[1],
      "BAD_INPUT",
      /networkd\.units\[0\]: "eth0\.service" is not a networkd unit name/,
    ],
    [
      "a networkd path taken",
      V2_CASES[13]?.[1],
      "BAD_INPUT",
      /"\/etc\/systemd\/network\/10-eth0\.network" is also/,
    ],
    [
      "a key of a later spec",
      V2_CASES[15]?.[1],
      "BAD_INPUT",
      /storage has the unknown key "directories" for spec 2\.0\.0 \(it came in spec 2\.1\.0\)/,
    ],
    [
      "a 2.0 owner name",
      {
        ignition: { version: "2.0.0" },
        storage: { files: [{ filesystem: "root", path: "/etc/a", user: { name: "core" } }] },
      },
      "BAD_INPUT",
      /unknown key "name" for spec 2\.0\.0 \(it came in spec 2\.1\.0\)/,
    ],
    ["passwd", V2_CASES[16]?.[1], "UNSUPPORTED", /passwd: users and groups/],
  ];
  for (const [name, cfg, code, message] of cases) {
    test(name, async () => {
      const { r, remove } = await applied(cfg);
      remove();
      assert.equal(r.ok ? "ok" : r.code, code, JSON.stringify(r));
      assert.match((r as { message: string }).message, message);
    });
  }
});
