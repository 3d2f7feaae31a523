/**
 * Token files (the machine's bootstrap token for the fetcher, the controller token for the
 * CLI's clients): one token on one line, in a file only its owner can read.
 */
import { readFile, stat } from "node:fs/promises";
import { BootsealError } from "../errors.ts";

/**
 * Reads a token (--token-file; `flag` names the option in messages, e.g. --spiffe-jwt-file). The file must be a regular file that neither group nor others
 * can read (like an SSH private key): a token another local user could read is a token
 * anyone on the machine can use to fetch the config first.
 */
export async function readTokenFile(path: string, flag = "--token-file"): Promise<string> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(path);
  } catch (err) {
    throw new BootsealError("USAGE", `${flag} ${path} cannot be read`, { cause: err });
  }
  if (!info.isFile()) throw new BootsealError("USAGE", `${flag} ${path} is not a regular file`);
  if ((info.mode & 0o077) !== 0) {
    throw new BootsealError(
      "USAGE",
      `${flag} ${path} is readable by group or others (mode ${(info.mode & 0o777).toString(8).padStart(4, "0")}): chmod 600 it`,
    );
  }
  const token = (await readFile(path, "utf8")).trim();
  if (token === "" || /\s/.test(token)) {
    throw new BootsealError("USAGE", `${flag} ${path} must hold one token on one line`);
  }
  return token;
}
