/**
 * The codec registry: format name or file path -> Codec (sops cmd/sops/formats/formats.go
 * and cmd/sops/common/common.go). Adding a format is one codec file plus one line here.
 */
import { binaryCodec } from "./binary.ts";
import type { Codec, Format } from "./codec.ts";
import { dotenvCodec } from "./dotenv.ts";
import { iniCodec } from "./ini.ts";
import { jsonCodec } from "./json.ts";
import { yamlCodec } from "./yaml.ts";

const CODECS: Readonly<Record<Format, Codec>> = {
  yaml: yamlCodec,
  json: jsonCodec,
  dotenv: dotenvCodec,
  ini: iniCodec,
  binary: binaryCodec,
};

export function codecFor(format: Format): Codec {
  return CODECS[format];
}

/**
 * sops' rule: a case-sensitive suffix match on the whole path (so `x.YAML` is binary and a
 * file named just `.env` is dotenv); anything unrecognised is binary.
 */
export function formatFromPath(path: string): Format {
  if (path.endsWith(".yaml") || path.endsWith(".yml")) return "yaml";
  if (path.endsWith(".json")) return "json";
  if (path.endsWith(".env")) return "dotenv";
  if (path.endsWith(".ini")) return "ini";
  return "binary";
}
