/**
 * Spec 2.x configs for ignition-v2.test.ts and ignition-v2-oracle.test.ts, each with the
 * outcome bootseal gives it ("ok" or the refusal's code): the shapes Cluster API's kubeadm
 * provider emits for Flatcar (2.3.0 from the Container Linux Config transpiler: files on
 * `filesystem: root`, `data:,` percent-encoded and base64 sources, decimal modes, empty `user`,
 * `group` and `verification` objects, units with `enabled` and drop-ins, networkd units), then
 * each older spec's own forms, then what the converter refuses.
 */
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { dataUrl } from "./ignition-fixture.ts";

export const kubeadmUnit =
  "[Unit]\nDescription=kubeadm\nConditionPathExists=/etc/kubeadm.yml\n[Service]\nType=oneshot\nExecStart=/etc/kubeadm.sh\n[Install]\nWantedBy=multi-user.target\n";

const sha = (fn: string, text: string): string => `${fn}-${createHash(fn).update(text).digest("hex")}`;

/** The kubeadm provider's Flatcar output (clc.Render), one file per source form. */
export const CABPK_FLATCAR = {
  ignition: { config: {}, security: { tls: {} }, timeouts: {}, version: "2.3.0" },
  networkd: {
    units: [
      {
        name: "10-eth0.network",
        contents: "[Match]\nName=eth0\n\n[Network]\nDHCP=yes\n",
        dropins: [{ name: "10-mtu.conf", contents: "[Link]\nMTUBytes=1450\n" }],
      },
    ],
  },
  passwd: {},
  storage: {
    files: [
      {
        filesystem: "root",
        group: {},
        path: "/etc/kubeadm.sh",
        user: {},
        contents: {
          source:
            "data:,%23!%2Fbin%2Fbash%0Aset%20-e%0A%0Akubeadm%20join%0Amkdir%20-p%20%2Frun%2Fcluster-api%20%26%26%20echo%20success%20%3E%20%2Frun%2Fcluster-api%2Fbootstrap-success.complete%0A",
          verification: {},
        },
        mode: 448,
      },
      {
        filesystem: "root",
        path: "/etc/kubeadm.yml",
        contents: { source: "data:,---%0Afoo%0A", verification: {} },
        mode: 384,
      },
      {
        filesystem: "root",
        path: "/etc/testfile.yaml",
        contents: { source: "data:;base64,Zm9vCg==", verification: {} },
        mode: 384,
      },
      {
        filesystem: "root",
        path: "/etc/ntp.conf",
        contents: { source: "data:,server%20foo.bar%0Aserver%20baz%0A" },
        mode: 420,
      },
      // No overwrite: spec 2 files overwrite by default (v3's default is the opposite).
      { filesystem: "root", path: "/etc/existing.conf", contents: { source: "data:,replaced%0A" } },
    ],
  },
  systemd: {
    units: [
      { contents: kubeadmUnit, enabled: true, name: "kubeadm.service" },
      { enabled: true, name: "ntpd.service" },
      {
        name: "containerd.service",
        dropins: [
          {
            name: "10-opts.conf",
            contents: "[Service]\nEnvironment=CONTAINERD_CONFIG=/etc/containerd/config.toml\n",
          },
        ],
      },
    ],
  },
};

export const V2_CASES: [string, unknown, "ok" | "BAD_INPUT" | "UNSUPPORTED"][] = [
  ["2.3.0: the kubeadm provider's Flatcar config", CABPK_FLATCAR, "ok"],
  [
    "2.0.0: modes and owners are plain integers (absent: 0), enable, networkd without drop-ins",
    {
      ignition: { version: "2.0.0", config: {} },
      storage: {
        files: [
          { filesystem: "root", path: "/etc/v20/a", contents: { source: "data:,a" }, mode: 420 },
          { filesystem: "root", path: "/etc/v20/no-mode", contents: { source: "data:,b" } },
          {
            filesystem: "root",
            path: "/etc//v20/./unclean",
            contents: { source: "data:,c" },
            user: { id: 500 },
          },
          { filesystem: "root", path: "/etc/v20/empty", mode: 384 },
          {
            filesystem: "root",
            path: "/etc/v20/hashed",
            contents: { source: "data:,h", verification: { hash: sha("sha512", "h") } },
            mode: 420,
          },
        ],
      },
      systemd: {
        units: [
          {
            name: "a.service",
            enable: true,
            contents: "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
          },
          {
            name: "old.service",
            dropins: [{ name: "10-x.conf", contents: "[Unit]\n" }, { name: "20-empty.conf" }],
          },
        ],
      },
      networkd: { units: [{ name: "20-lan.netdev", contents: "[NetDev]\nName=br0\nKind=bridge\n" }] },
    },
    "ok",
  ],
  [
    "2.1.0: directories (mode 0 when absent), links, owners by name, enabled false wins over enable",
    {
      ignition: { version: "2.1.0", timeouts: { httpTotal: 30 } },
      storage: {
        directories: [
          {
            filesystem: "root",
            path: "/etc/v21",
            mode: 493,
            user: { name: "core" },
            group: { name: "docker" },
          },
          { filesystem: "root", path: "/etc/v21/no-mode" },
        ],
        files: [
          {
            filesystem: "root",
            path: "/etc/v21/f",
            contents: { source: "data:,f" },
            mode: 416,
            group: { id: 233 },
          },
        ],
        links: [
          { filesystem: "root", path: "/etc/v21/sym", target: "/etc/v21/f" },
          { filesystem: "root", path: "/etc/v21/hard", target: "/etc/v21/f", hard: true },
        ],
      },
      systemd: {
        units: [
          { name: "a.service", enable: true, enabled: false, contents: "[Service]\nExecStart=/bin/true\n" },
          {
            name: "b.service",
            enabled: true,
            contents: "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
          },
          { name: "masked.service", mask: false },
          { name: "old.service", mask: true },
        ],
      },
    },
    "ok",
  ],
  [
    "2.2.0: append to an existing and a new file, overwrite false on a new file, a link over an existing one",
    {
      ignition: { version: "2.2.0", security: { tls: { certificateAuthorities: [] } } },
      storage: {
        files: [
          {
            filesystem: "root",
            path: "/etc/existing.conf",
            append: true,
            contents: { source: "data:,more%0A" },
          },
          {
            filesystem: "root",
            path: "/etc/v22/new-appended",
            append: true,
            contents: { source: "data:;base64,YXBwCg==" },
            mode: 384,
          },
          { filesystem: "root", path: "/etc/v22/kept", overwrite: false, contents: { source: "data:,k" } },
          {
            filesystem: "root",
            path: "/etc/v22/gz",
            contents: {
              source: dataUrl(gzipSync("compressed contents\n")),
              compression: "gzip",
            },
          },
        ],
        links: [
          {
            filesystem: "root",
            path: "/etc/localtime",
            target: "/usr/share/zoneinfo/Asia/Tokyo",
            overwrite: true,
          },
        ],
      },
      networkd: {
        units: [
          { name: "30-wlan.network", dropins: [{ name: "10-a.conf", contents: "[Network]\nDHCP=no\n" }] },
        ],
      },
    },
    "ok",
  ],
  [
    "2.4.0: proxy and empty httpHeaders",
    {
      ignition: { version: "2.4.0", proxy: { httpProxy: "http://proxy:3128" } },
      storage: {
        files: [{ filesystem: "root", path: "/etc/v24", contents: { source: "data:,x", httpHeaders: [] } }],
      },
    },
    "ok",
  ],
  [
    "2.3.0: an existing file kept by overwrite false is an error, as in Ignition",
    {
      ignition: { version: "2.3.0" },
      storage: {
        files: [
          {
            filesystem: "root",
            path: "/etc/existing.conf",
            overwrite: false,
            contents: { source: "data:,x" },
          },
        ],
      },
    },
    "BAD_INPUT",
  ],
  [
    "another filesystem than root",
    {
      ignition: { version: "2.3.0" },
      storage: { files: [{ filesystem: "oem", path: "/grub.cfg", contents: { source: "data:,x" } }] },
    },
    "UNSUPPORTED",
  ],
  [
    "a declared non-root filesystem",
    {
      ignition: { version: "2.3.0" },
      storage: { filesystems: [{ name: "data", mount: { device: "/dev/sdb", format: "ext4" } }] },
    },
    "UNSUPPORTED",
  ],
  [
    "no filesystem",
    {
      ignition: { version: "2.2.0" },
      storage: { files: [{ path: "/etc/x", contents: { source: "data:,x" } }] },
    },
    "BAD_INPUT",
  ],
  [
    "a relative path",
    { ignition: { version: "2.3.0" }, storage: { directories: [{ filesystem: "root", path: "etc/x" }] } },
    "BAD_INPUT",
  ],
  [
    "append and overwrite",
    {
      ignition: { version: "2.3.0" },
      storage: {
        files: [
          {
            filesystem: "root",
            path: "/etc/x",
            append: true,
            overwrite: true,
            contents: { source: "data:,x" },
          },
        ],
      },
    },
    "BAD_INPUT",
  ],
  [
    "a sha256 hash (spec 2 knows sha512 only)",
    {
      ignition: { version: "2.3.0" },
      storage: {
        files: [
          {
            filesystem: "root",
            path: "/etc/x",
            contents: { source: "data:,x", verification: { hash: sha("sha256", "x") } },
          },
        ],
      },
    },
    "BAD_INPUT",
  ],
  [
    "a networkd unit without a networkd type",
    {
      ignition: { version: "2.3.0" },
      networkd: { units: [{ name: "eth0.service", contents: "[Match]\n" }] },
    },
    "BAD_INPUT",
  ],
  [
    "a file on a networkd unit's path",
    {
      ignition: { version: "2.3.0" },
      storage: {
        files: [
          {
            filesystem: "root",
            path: "/etc/systemd/network/10-eth0.network",
            contents: { source: "data:,x" },
          },
        ],
      },
      networkd: { units: [{ name: "10-eth0.network", contents: "[Match]\nName=eth0\n" }] },
    },
    "BAD_INPUT",
  ],
  [
    "a unit listed twice (upstream ign-converter refuses; Flatcar's fork merges)",
    {
      ignition: { version: "2.3.0" },
      systemd: {
        units: [
          { name: "a.service", enabled: true },
          { name: "a.service", mask: true },
        ],
      },
    },
    "BAD_INPUT",
  ],
  [
    "a key of a later spec (directories came in 2.1.0)",
    { ignition: { version: "2.0.0" }, storage: { directories: [] } },
    "BAD_INPUT",
  ],
  [
    "passwd users (as for spec 3)",
    {
      ignition: { version: "2.3.0" },
      passwd: { users: [{ name: "core", sshAuthorizedKeys: ["ssh-ed25519 AAAA"] }] },
    },
    "UNSUPPORTED",
  ],
  [
    "an appended config (ignition.config.append becomes merge)",
    { ignition: { version: "2.3.0", config: { append: [{ source: "https://example.com/more.ign" }] } } },
    "UNSUPPORTED",
  ],
  [
    "a remote source",
    {
      ignition: { version: "2.3.0" },
      storage: {
        files: [{ filesystem: "root", path: "/etc/x", contents: { source: "https://example.com/x" } }],
      },
    },
    "UNSUPPORTED",
  ],
];
