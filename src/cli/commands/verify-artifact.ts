import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import {
  loadPublicKey,
  readArtifact,
  readDigest,
  readSignature,
  verifyArtifact,
} from "../../artifact/signing.ts";
import { BootsealError } from "../../errors.ts";
import type { Command } from "../command.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";

async function readSmall(path: string, flag: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new BootsealError("USAGE", `cannot read --${flag} ${path}`, { cause: err });
  }
}

const spec = {
  name: "verify-artifact",
  summary: "check a release file's Ed25519 signature and SHA-256 before running it",
  operands: "FILE",
  flags: [
    {
      name: "public-key",
      type: "string",
      value: "PUB.pem",
      required: true,
      help: "the Ed25519 public key (PEM) the file must be signed with",
    },
    {
      name: "signature",
      type: "string",
      value: "SIG",
      help: "the raw 64-byte signature (default: FILE.sig)",
    },
    {
      name: "sha256",
      type: "string",
      value: "HEX|FILE",
      help: "the expected SHA-256, as hex or a sha256sum file",
    },
  ],
} as const satisfies CommandSpec;

export const verifyArtifactCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    const file = positionals[0];
    if (file === undefined || positionals.length !== 1) {
      throw new BootsealError("USAGE", "verify-artifact needs --public-key PUB.pem and one FILE");
    }
    const publicKey = values["public-key"] as string;
    const key = loadPublicKey(await readSmall(publicKey, "public-key"), publicKey);
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
