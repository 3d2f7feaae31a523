/**
 * bootseal's Ignition payload on its own (the differential against Ignition itself is
 * ignition-oracle.test.ts): all or nothing (a failing Nth write undoes directories, links,
 * masks and files), checks before the first write, the allowed roots and unsafe modes, the
 * sentinel, versions and unknown keys in messages, no content in messages, detection, and the
 * systemctl calls through a recording systemctl stand-in script.
 */
import assert from "node:assert/strict";
import { chmodSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, test } from "node:test";
import { BootsealError } from "../../src/errors.ts";
import { isIgnitionConfig } from "../../src/fetcher/payloads/ignition.ts";
import { systemctlCalls } from "../../src/fetcher/payloads/ignition-systemd.ts";
import { systemctlControl } from "../../src/fetcher/payloads/systemctl.ts";

/** systemctl's own output is not what these tests look at. */
const QUIET = { env: process.env, stdout: new PassThrough(), stderr: new PassThrough() };

import { atomicWriter, type FileWriter } from "../../src/fetcher/write-plan.ts";
import { dataUrl, makeRoot, ours, snapshot, tempDir } from "./ignition-fixture.ts";

const unit = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";

function withRoot(fn: (root: string) => Promise<void>): () => Promise<void> {
  return async () => {
    const { dir, remove } = tempDir("ign-unit");
    try {
      makeRoot(dir);
      await fn(dir);
    } finally {
      remove();
    }
  };
}

const big = {
  ignition: { version: "3.4.0" },
  storage: {
    directories: [
      { path: "/etc/newdir/deep", mode: 448 },
      { path: "/etc/exdir", mode: 493, user: { id: 500 } },
    ],
    files: [
      { path: "/etc/existing.conf", overwrite: true, contents: { source: dataUrl("replaced\n") } },
      { path: "/etc/newdir/a", contents: { source: dataUrl("a") } },
      { path: "/var/lib/x/b", contents: { source: dataUrl("b") } },
    ],
    links: [
      { path: "/etc/localtime", target: "/usr/share/zoneinfo/Asia/Tokyo", overwrite: true },
      { path: "/etc/hard", target: "/etc/newdir/a", hard: true },
    ],
  },
  systemd: {
    units: [
      { name: "a.service", enabled: true, contents: unit },
      { name: "old.service", mask: true },
      { name: "masked.service", mask: false },
    ],
  },
};

describe("Ignition payload: all or nothing", () => {
  for (const n of [1, 2, 3, 4]) {
    test(
      `write ${n} failing leaves the root as it was (directories, links, masks, files)`,
      withRoot(async (root) => {
        const before = snapshot(root);
        let count = 0;
        const write: FileWriter = async (target, data, options) => {
          if (++count === n) throw new BootsealError("IO_ERROR", "injected failure");
          await atomicWriter(target, data, options);
        };
        const r = await ours(root, JSON.stringify(big), { write });
        assert.equal(r.ok, false);
        assert.equal((r as { code: string }).code, "IO_ERROR");
        assert.deepEqual(snapshot(root), before);
      }),
    );
  }

  test(
    "the same config without a failure writes everything",
    withRoot(async (root) => {
      const r = await ours(root, JSON.stringify(big));
      assert.ok(r.ok, JSON.stringify(r));
      const tree = snapshot(root);
      assert.equal(tree.nodes["etc/localtime"]?.target, "/usr/share/zoneinfo/Asia/Tokyo");
      assert.equal(tree.nodes["etc/systemd/system/old.service"]?.target, "/dev/null");
      assert.equal(tree.nodes["etc/systemd/system/masked.service"], undefined);
      assert.equal(tree.nodes["etc/newdir/deep"]?.mode, 0o700);
      assert.deepEqual(tree.nodes["etc/exdir"], { type: "dir", mode: 0o755, uid: 500, gid: 0 });
      assert.deepEqual(tree.hardLinks, [["etc/hard", "etc/newdir/a"]]);
      assert.equal(
        Buffer.from(tree.nodes["etc/existing.conf"]?.content ?? "", "base64").toString(),
        "replaced\n",
      );
      assert.ok(!Object.keys(tree.nodes).some((p) => p.includes("bootseal-keep")), "kept versions dropped");
    }),
  );

  test(
    "a bad last entry is found before the first write (hash, remote source, unknown group)",
    withRoot(async (root) => {
      const before = snapshot(root);
      const tails = [
        {
          path: "/etc/z",
          contents: { source: dataUrl("CANARY-a1b2"), verification: { hash: `sha256-${"0".repeat(64)}` } },
        },
        { path: "/etc/z", contents: { source: "s3://bucket/key" } },
        { path: "/etc/z", group: { name: "no-such-group" } },
      ];
      for (const tail of tails) {
        const cfg = { ...big, storage: { ...big.storage, files: [...big.storage.files, tail] } };
        const r = await ours(root, JSON.stringify(cfg));
        assert.equal(r.ok, false);
        assert.ok(!(r as { message: string }).message.includes("CANARY"), "no content in messages");
        assert.match((r as { message: string }).message, /storage\.files\[3\]/);
        assert.deepEqual(snapshot(root), before);
      }
    }),
  );
});

describe("Ignition payload: policy", () => {
  test(
    "paths outside the allowed roots are PATH_NOT_ALLOWED, nothing written",
    withRoot(async (root) => {
      const before = snapshot(root);
      for (const storage of [
        { files: [{ path: "/usr/bin/x", contents: { source: dataUrl("x") } }] },
        { directories: [{ path: "/usr/lib/d" }] },
        { links: [{ path: "/usr/l", target: "/etc/passwd" }] },
        {
          files: [{ path: "/etc/ok", contents: { source: dataUrl("x") } }],
          links: [{ path: "/etc/h", target: "/usr/x", hard: true }],
        },
      ]) {
        const r = await ours(root, JSON.stringify({ ignition: { version: "3.0.0" }, storage }), {
          allowedRoots: ["/etc", "/var/lib"],
        });
        assert.equal((r as { code: string }).code, "PATH_NOT_ALLOWED", JSON.stringify(r));
        assert.deepEqual(snapshot(root), before);
      }
    }),
  );

  test(
    "set-id, sticky and world-writable modes need --allow-unsafe-modes",
    withRoot(async (root) => {
      for (const storage of [
        { files: [{ path: "/etc/s", mode: 0o4755 }] },
        { directories: [{ path: "/etc/w", mode: 0o777 }] },
      ]) {
        const text = JSON.stringify({ ignition: { version: "3.4.0" }, storage });
        const r = await ours(root, text, { allowUnsafeModes: false });
        assert.equal((r as { code: string }).code, "BAD_INPUT");
        assert.match((r as { message: string }).message, /allow-unsafe-modes/);
        assert.ok((await ours(root, text, { allowUnsafeModes: true })).ok);
      }
    }),
  );

  test(
    "a config writing the Cluster API sentinel itself says so and is not refused for it",
    withRoot(async (root) => {
      const host = realpathSync(root);
      const sentinel = join(host, "run/cluster-api/bootstrap-success.complete");
      const marker = join(host, "var/lib/bootseal/bootstrap.done");
      const reserved = [
        {
          what: "the sentinel",
          target: { hostPath: sentinel, hostDir: join(host, "run/cluster-api"), missingDirs: [] },
        },
        {
          what: "the marker",
          target: { hostPath: marker, hostDir: join(host, "var/lib/bootseal"), missingDirs: [] },
        },
      ];
      const files = [
        { path: "/run/cluster-api/bootstrap-success.complete", contents: { source: "data:,success%0A" } },
      ];
      const r = await ours(root, JSON.stringify({ ignition: { version: "3.0.0" }, storage: { files } }), {
        reserved,
      });
      assert.ok(r.ok && r.writesSentinel, JSON.stringify(r));
      assert.equal(readFileSync(sentinel, "utf8"), "success\n");
      const onMarker = [{ path: "/var/lib/bootseal/bootstrap.done", contents: { source: "data:,x" } }];
      const m = await ours(
        root,
        JSON.stringify({ ignition: { version: "3.0.0" }, storage: { files: onMarker } }),
        { reserved },
      );
      assert.match((m as { message: string }).message, /the marker/);
      const plain = await ours(root, JSON.stringify({ ignition: { version: "3.0.0" } }), { reserved });
      assert.ok(plain.ok && !plain.writesSentinel);
    }),
  );
});

describe("Ignition payload: reading the config", () => {
  const cases: [string, unknown, string, RegExp][] = [
    ["Ignition v1", { ignition: { version: "1.0.0" } }, "UNSUPPORTED", /Ignition v1/],
    ["a spec after 2.4", { ignition: { version: "2.5.0" } }, "UNSUPPORTED", /not supported/],
    ["a short version", { ignition: { version: "3.4" } }, "BAD_INPUT", /not a spec version/],
    ["no version", { ignition: {} }, "BAD_INPUT", /version is missing/],
    [
      "a key of a later spec",
      { ignition: { version: "3.0.0", proxy: {} } },
      "BAD_INPUT",
      /unknown key "proxy" for spec 3\.0\.0 \(it came in spec 3\.1\.0\)/,
    ],
    [
      "a wrong type",
      { ignition: { version: "3.2.0" }, storage: { files: [{ path: "/etc/a", mode: "0644" }] } },
      "BAD_INPUT",
      /storage\.files\[0\]\.mode must be an integer/,
    ],
    ["not JSON", "#cloud-config\n", "BAD_INPUT", /not a JSON object/],
  ];
  for (const [name, cfg, code, message] of cases) {
    test(
      name,
      withRoot(async (root) => {
        const r = await ours(root, typeof cfg === "string" ? cfg : JSON.stringify(cfg));
        assert.equal((r as { code: string }).code, code, JSON.stringify(r));
        assert.match((r as { message: string }).message, message);
      }),
    );
  }

  test("isIgnitionConfig tells Ignition JSON from other payloads", () => {
    const enc = (s: string) => new TextEncoder().encode(s);
    assert.ok(isIgnitionConfig(enc('{"ignition":{"version":"3.4.0"}}')));
    assert.ok(isIgnitionConfig(enc(' {"ignition":{"version":"2.2.0"},"storage":{}}')));
    for (const other of [
      "#cloud-config\nruncmd: []\n",
      "path: /etc/a\ncontent: x\n",
      '{"data":"x"}',
      '{"ignition":{}}',
      "{",
      "",
    ]) {
      assert.equal(isIgnitionConfig(enc(other)), false, other);
    }
  });
});

describe("Ignition payload: systemctl", () => {
  test("the calls on the running system: daemon-reload, enable, disable, start --no-block", () => {
    const units = [
      { name: "a.service", enabled: true },
      { name: "b.service", enabled: false },
      { name: "c.service", enabled: true, mask: true },
      { name: "d.service" },
    ];
    assert.deepEqual(systemctlCalls(units, "/"), [
      ["daemon-reload"],
      ["enable", "a.service"],
      ["disable", "b.service"],
      ["start", "--no-block", "a.service"],
    ]);
    assert.deepEqual(systemctlCalls(units, "/img"), [
      ["--root", "/img", "enable", "a.service"],
      ["--root", "/img", "disable", "b.service"],
    ]);
    assert.deepEqual(systemctlCalls([], "/"), []);
  });

  test(
    "a recording systemctl stand-in script gets the calls; a failing one is EXEC_FAILED after the files are in place",
    withRoot(async (root) => {
      const { dir, remove } = tempDir("ign-systemctl");
      try {
        const record = join(dir, "calls");
        const script = join(dir, "systemctl");
        writeFileSync(
          script,
          `#!/bin/sh\necho "$*" >> '${record}'\n[ "$4" != fail.service ] || { echo "no such unit" >&2; exit 5; }\n`,
        );
        chmodSync(script, 0o755);
        const units = [
          { name: "a.service", enabled: true, contents: unit },
          { name: "b.timer", enabled: false },
        ];
        const cfg = { ignition: { version: "3.3.0" }, systemd: { units } };
        const r = await ours(root, JSON.stringify(cfg), { systemd: systemctlControl(script, QUIET) });
        assert.ok(r.ok, JSON.stringify(r));
        const host = realpathSync(root);
        assert.equal(
          readFileSync(record, "utf8"),
          `--root ${host} enable a.service\n--root ${host} disable b.timer\n`,
        );
        const failing = {
          ignition: { version: "3.3.0" },
          systemd: { units: [{ name: "fail.service", enabled: true, contents: unit }] },
        };
        const f = await ours(root, JSON.stringify(failing), { systemd: systemctlControl(script, QUIET) });
        assert.equal((f as { code: string }).code, "EXEC_FAILED");
        assert.match((f as { message: string }).message, /exited with code 5/);
        assert.equal(readFileSync(join(root, "etc/systemd/system/fail.service"), "utf8"), unit);
      } finally {
        remove();
      }
    }),
  );
});
