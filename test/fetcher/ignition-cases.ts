/**
 * The hand-picked corpus of ignition-oracle.test.ts: each config with the outcome bootseal
 * gives it ("ok", or the refusal's code). The comparison with Ignition itself is the test's.
 */
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { dataUrl } from "./ignition-fixture.ts";

export const v = (n: number): { version: string } => ({ version: `3.${n}.0` });
export const unit =
  "[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";
const gz = gzipSync(Buffer.from("compressed contents\n"));
export const sha512 = (b: Buffer | string): string =>
  `sha512-${createHash("sha512").update(b).digest("hex")}`;

export const HAND_PICKED: [string, unknown, "ok" | "BAD_INPUT" | "UNSUPPORTED"][] = [
  [
    "kubeadm-like files, modes, owners by name and id",
    {
      ignition: v(0),
      storage: {
        files: [
          { path: "/etc/kubernetes/pki/ca.crt", contents: { source: dataUrl("CERT\n") }, mode: 420 },
          {
            path: "/etc/kubernetes/kubeadm.yaml",
            contents: { source: "data:,kind%3A%20JoinConfiguration%0A" },
            mode: 384,
            user: { name: "core" },
            group: { id: 233 },
          },
          { path: "/etc/existing.conf", overwrite: true, contents: { source: dataUrl("new\n") } },
          { path: "/etc/empty" },
        ],
      },
    },
    "ok",
  ],
  [
    "gzip with a hash of the decompressed bytes, append to an existing file, existing file kept",
    {
      ignition: v(1),
      storage: {
        files: [
          {
            path: "/etc/gz",
            contents: {
              source: dataUrl(gz),
              compression: "gzip",
              verification: { hash: sha512("compressed contents\n") },
            },
          },
          {
            path: "/etc/existing.conf",
            append: [{ source: "data:,more%0A" }, { source: dataUrl("and more\n") }],
          },
          { path: "/etc/new-appended", append: [{ source: "data:,only%20appended" }], mode: 416 },
        ],
      },
    },
    "ok",
  ],
  [
    "directories, links (symbolic over an existing one, hard), units, drop-ins, mask, unmask",
    {
      ignition: v(3),
      storage: {
        directories: [
          { path: "/etc/exdir", mode: 448 },
          { path: "/var/lib/app/data", mode: 488, user: { id: 500 } },
        ],
        files: [{ path: "/etc/app/target", contents: { source: dataUrl("t") } }],
        links: [
          { path: "/etc/localtime", target: "/usr/share/zoneinfo/Europe/Paris", overwrite: true },
          { path: "/etc/app/sym", target: "target", user: { name: "core" } },
          { path: "/etc/app/hard", target: "/etc/app/target", hard: true },
        ],
      },
      systemd: {
        units: [
          {
            name: "a.service",
            enabled: true,
            contents: unit,
            dropins: [{ name: "10-env.conf", contents: "[Service]\nEnvironment=A=1\n" }],
          },
          { name: "old.service", enabled: false },
          { name: "b.service", mask: true },
          { name: "masked.service", mask: false },
        ],
      },
    },
    "ok",
  ],
  [
    "data: URL forms, empty sources, mode 0, empty drop-ins, an existing link kept",
    {
      ignition: v(4),
      storage: {
        files: [
          {
            path: "/etc/d1",
            contents: {
              source: `data:text/plain;charset=utf-8;base64,${Buffer.from("héllo").toString("base64")}`,
            },
          },
          { path: "/etc/d2", contents: { source: "data:text/plain,a%2Cb%25c%0A%00end" } },
          { path: "/etc/d3", contents: { source: "" }, mode: 0 },
          { path: "/etc/d4", contents: { source: "data:," } },
        ],
        directories: [{ path: "/etc/exdir", overwrite: false }],
        links: [
          { path: "/etc/localtime", target: "/usr/share/zoneinfo/Etc/UTC" },
          { path: "/etc/existing-hard", target: "/etc/existing.conf", hard: true },
        ],
      },
      systemd: {
        units: [
          // No instance (NAME@I.service) enabled: ignition-apply then asks systemd over D-Bus, not running here.
          { name: "getty@.service", contents: unit },
          { name: "old.service", dropins: [{ name: "empty.conf", contents: "" }, { name: "none.conf" }] },
          { name: "c.service", contents: "" },
        ],
      },
    },
    "ok",
  ],
  [
    "a hard link to a missing file",
    { ignition: v(4), storage: { links: [{ path: "/etc/h", target: "/etc/nothing", hard: true }] } },
    "BAD_INPUT",
  ],
  [
    "a link where a different one exists",
    { ignition: v(4), storage: { links: [{ path: "/etc/localtime", target: "/x" }] } },
    "BAD_INPUT",
  ],
  [
    "a directory where a file exists",
    { ignition: v(4), storage: { directories: [{ path: "/etc/existing.conf" }] } },
    "BAD_INPUT",
  ],
  [
    "bad base64 in a data: URL",
    { ignition: v(4), storage: { files: [{ path: "/etc/b", contents: { source: "data:;base64,%%%" } }] } },
    "BAD_INPUT",
  ],
  [
    "gzip that is not gzip",
    {
      ignition: v(4),
      storage: { files: [{ path: "/etc/b", contents: { source: "data:,plain", compression: "gzip" } }] },
    },
    "BAD_INPUT",
  ],
  [
    "an unknown compression",
    {
      ignition: v(4),
      storage: { files: [{ path: "/etc/b", contents: { source: "data:,plain", compression: "xz" } }] },
    },
    "BAD_INPUT",
  ],
  [
    "user id and name both",
    { ignition: v(4), storage: { files: [{ path: "/etc/b", user: { id: 0, name: "root" } }] } },
    "BAD_INPUT",
  ],
  [
    "an existing file without overwrite",
    {
      ignition: v(2),
      storage: { files: [{ path: "/etc/existing.conf", contents: { source: dataUrl("x") } }] },
    },
    "BAD_INPUT",
  ],
  [
    "a wrong hash",
    {
      ignition: v(4),
      storage: {
        files: [{ path: "/etc/h", contents: { source: dataUrl("x"), verification: { hash: sha512("y") } } }],
      },
    },
    "BAD_INPUT",
  ],
  [
    "a malformed hash",
    {
      ignition: v(4),
      storage: {
        files: [{ path: "/etc/h", contents: { source: dataUrl("x"), verification: { hash: "md5-00" } } }],
      },
    },
    "BAD_INPUT",
  ],
  [
    "httpHeaders in 3.0",
    {
      ignition: v(0),
      storage: { files: [{ path: "/etc/h", contents: { source: dataUrl("x"), httpHeaders: [] } }] },
    },
    "BAD_INPUT",
  ],
  [
    "an unknown key",
    { ignition: v(4), storage: { files: [{ path: "/etc/h", contnets: { source: dataUrl("x") } }] } },
    "BAD_INPUT",
  ],
  ["a relative path", { ignition: v(4), storage: { files: [{ path: "etc/h" }] } }, "BAD_INPUT"],
  ["a dirty path", { ignition: v(4), storage: { files: [{ path: "/etc//h" }] } }, "BAD_INPUT"],
  [
    "the same path twice",
    { ignition: v(4), storage: { files: [{ path: "/etc/h" }], directories: [{ path: "/etc/h" }] } },
    "BAD_INPUT",
  ],
  [
    "a mode out of range",
    { ignition: v(4), storage: { files: [{ path: "/etc/h", mode: 8192 }] } },
    "BAD_INPUT",
  ],
  [
    "overwrite without a source",
    { ignition: v(4), storage: { files: [{ path: "/etc/h", overwrite: true }] } },
    "BAD_INPUT",
  ],
  [
    "an unknown user",
    { ignition: v(4), storage: { files: [{ path: "/etc/h", user: { name: "nobody-here" } }] } },
    "BAD_INPUT",
  ],
  [
    "a unit without a type",
    { ignition: v(4), systemd: { units: [{ name: "a", contents: unit }] } },
    "BAD_INPUT",
  ],
  [
    "a drop-in not .conf",
    { ignition: v(4), systemd: { units: [{ name: "a.service", dropins: [{ name: "x", contents: "" }] }] } },
    "BAD_INPUT",
  ],
  [
    "a file under a link",
    {
      ignition: v(4),
      storage: { files: [{ path: "/etc/l/x" }], links: [{ path: "/etc/l", target: "/tmp" }] },
    },
    "BAD_INPUT",
  ],
  [
    "a file on a unit's path",
    {
      ignition: v(4),
      storage: { files: [{ path: "/etc/systemd/system/a.service" }] },
      systemd: { units: [{ name: "a.service", contents: unit }] },
    },
    "BAD_INPUT",
  ],
  ["kernelArguments only since 3.3", { ignition: v(2), kernelArguments: { shouldExist: [] } }, "BAD_INPUT"],
  ["3.5.0-experimental", { ignition: { version: "3.5.0-experimental" } }, "BAD_INPUT"],
  [
    "an https source",
    {
      ignition: v(4),
      storage: { files: [{ path: "/etc/h", contents: { source: "https://example.com/x" } }] },
    },
    "UNSUPPORTED",
  ],
  ["passwd users", { ignition: v(4), passwd: { users: [{ name: "core" }] } }, "UNSUPPORTED"],
  ["storage.disks", { ignition: v(4), storage: { disks: [{ device: "/dev/vda" }] } }, "UNSUPPORTED"],
  ["kernelArguments in 3.3", { ignition: v(3), kernelArguments: { shouldExist: ["quiet"] } }, "UNSUPPORTED"],
  ["spec 3.5.0", { ignition: { version: "3.5.0" } }, "UNSUPPORTED"],
  [
    "empty lists of refused sections",
    { ignition: v(4), passwd: { users: [] }, storage: { disks: [], luks: [] }, kernelArguments: {} },
    "ok",
  ],
];
