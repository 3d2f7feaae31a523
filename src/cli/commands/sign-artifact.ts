import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import {
  generateSigningKey,
  loadPrivateKey,
  readArtifact,
  sha256Hex,
  signArtifact,
} from "../../artifact/signing.ts";
import { BootsealError } from "../../errors.ts";
import { writeFileAtomic } from "../../files/atomic-write.ts";
import type { Command } from "../command.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";

const spec = {
  name: "sign-artifact",
  summary: "sign a release file (the single executable) with Ed25519; writes FILE.sig and FILE.sha256",
  operands: "FILE",
  forms: ["--generate-key KEY.pem [--public-out PUB.pem]"],
  flags: [
    { name: "key", type: "string", value: "KEY.pem", help: "the Ed25519 private key (PEM) to sign with" },
    {
      name: "signature-out",
      type: "string",
      value: "SIG",
      help: "where the raw 64-byte signature goes (default: FILE.sig)",
    },
    {
      name: "sha256-out",
      type: "string",
      value: "FILE",
      help: "where the sha256sum line goes (default: FILE.sha256)",
    },
    {
      name: "generate-key",
      type: "string",
      value: "KEY.pem",
      help: "write a new Ed25519 private key here (0600) instead of signing",
    },
    {
      name: "public-out",
      type: "string",
      value: "PUB.pem",
      help: "with --generate-key: where its public key goes (default: KEY.pub.pem)",
    },
  ],
} as const satisfies CommandSpec;

export const signArtifactCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    const generate = values["generate-key"];
    if (generate !== undefined) {
      if (positionals.length > 0) throw new BootsealError("USAGE", "--generate-key takes no file");
      const { privatePem, publicPem } = generateSigningKey();
      const publicOut = values["public-out"] ?? generate.replace(/(\.pem)?$/, ".pub.pem");
      await writeFileAtomic(generate, new TextEncoder().encode(privatePem), { mode: 0o600 });
      await writeFileAtomic(publicOut, new TextEncoder().encode(publicPem), { mode: 0o644 });
      io.stdout.write(`private key: ${generate} (0600)\npublic key: ${publicOut}\n`);
      return 0;
    }
    const file = positionals[0];
    if (values.key === undefined || file === undefined || positionals.length !== 1) {
      throw new BootsealError("USAGE", "sign-artifact needs --key KEY.pem and one FILE");
    }
    let pem: Buffer;
    try {
      pem = await readFile(values.key);
    } catch (err) {
      throw new BootsealError("USAGE", `cannot read --key ${values.key}`, { cause: err });
    }
    const key = loadPrivateKey(pem, values.key);
    const data = await readArtifact(file);
    const sha256 = sha256Hex(data);
    const sigOut = values["signature-out"] ?? `${file}.sig`;
    const shaOut = values["sha256-out"] ?? `${file}.sha256`;
    await writeFileAtomic(sigOut, signArtifact(data, key), { mode: 0o644 });
    await writeFileAtomic(shaOut, new TextEncoder().encode(`${sha256}  ${basename(file)}\n`), {
      mode: 0o644,
    });
    io.stdout.write(`${sha256}  ${basename(file)}\nsignature: ${sigOut}\n`);
    return 0;
  },
};
