import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { parseArgs } from "node:util";
import {
  loadPublicKey,
  readArtifact,
  readDigest,
  readSignature,
  verifyArtifact,
} from "../../artifact/signing.ts";
import { BootsealError } from "../../errors.ts";
import type { Command } from "../command.ts";

async function readSmall(path: string, flag: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new BootsealError("USAGE", `cannot read --${flag} ${path}`, { cause: err });
  }
}

export const verifyArtifactCommand: Command = {
  name: "verify-artifact",
  summary: "check a release file's Ed25519 signature (and SHA-256) before running it",
  usage: "bootseal verify-artifact --public-key PUB.pem [--signature SIG] [--sha256 HEX|FILE] FILE",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        "public-key": { type: "string" },
        signature: { type: "string" },
        sha256: { type: "string" },
      },
    });
    const file = positionals[0];
    if (values["public-key"] === undefined || file === undefined || positionals.length !== 1) {
      throw new BootsealError("USAGE", "verify-artifact needs --public-key PUB.pem and one FILE");
    }
    const key = loadPublicKey(await readSmall(values["public-key"], "public-key"), values["public-key"]);
    const signature = readSignature(await readSmall(values.signature ?? `${file}.sig`, "signature"));
    let expected: string | undefined;
    if (values.sha256 !== undefined) {
      expected = /^[0-9a-fA-F]{64}$/.test(values.sha256)
        ? values.sha256.toLowerCase()
        : readDigest((await readSmall(values.sha256, "sha256")).toString("utf8"));
    }
    const data = await readArtifact(file);
    const { sha256 } = verifyArtifact(data, signature, key, expected);
    io.stdout.write(`OK ${sha256}  ${basename(file)}\n`);
    return 0;
  },
};
