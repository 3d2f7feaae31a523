import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { parseArgs } from "node:util";
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

export const signArtifactCommand: Command = {
  name: "sign-artifact",
  summary: "sign a release file with Ed25519: FILE.sig (raw 64 bytes) and FILE.sha256 (sha256sum format)",
  usage:
    "bootseal sign-artifact --key KEY.pem [--signature-out SIG] [--sha256-out F] FILE\n" +
    "bootseal sign-artifact --generate-key KEY.pem [--public-out PUB.pem]",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        key: { type: "string" },
        "generate-key": { type: "string" },
        "public-out": { type: "string" },
        "signature-out": { type: "string" },
        "sha256-out": { type: "string" },
      },
    });
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
