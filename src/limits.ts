/**
 * The one input cap: every document, answer, object or file bootseal reads whole into memory
 * (the CLI's input, the fetcher's download, an object rotate reads, a service request body at
 * most) stops here. 64 MiB is far above any bootstrap payload and small enough that a hostile
 * or broken peer cannot exhaust memory.
 */
export const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;

/** "64 MiB" for messages, so a changed limit cannot leave a stale number in an error. */
export function describeBytes(bytes: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB"] as const;
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && value % 1024 === 0 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value} ${units[unit]}`;
}

/**
 * The deepest nesting of mappings and sequences a document may have (the top-level mapping is
 * level 1), in every format: YAML and JSON documents, and the flattened metadata names of the
 * dotenv and INI formats. Every walker over a document recurses once per level, so this is
 * what keeps hostile input (`[[[[…]]]]` a hundred thousand deep) from exhausting the stack.
 * Configuration documents nest a few dozen levels at most; sops (go-yaml, encoding/json)
 * allows 10,000, which the `yaml` package's composer cannot reach on Node's default stack.
 */
export const MAX_NESTING_DEPTH = 256;

/**
 * YAML alias expansion: at most this many nodes (keys, values, collections) may come from
 * expanding aliases in one document stream, however large it is ("billion laughs"). Below the
 * ceiling go-yaml v3's ratio rule also applies (decode.go allowedAliasRatio): once more than
 * 100 of over 1,000 nodes come from aliases, at most 99% of the nodes may come from aliases,
 * falling linearly to 10% between 400,000 and 4,000,000 nodes.
 */
export const MAX_ALIAS_EXPANSION_NODES = 100_000;
