/**
 * The installed package's root: the nearest directory above a module that holds a
 * package.json. The same from the source tree (src/config/), the bundle (dist/cli/, and its
 * code-split chunks one level deeper) and an npm install (node_modules/bootseal/dist/…), so a
 * default path derived from the package (the artifacts directory) does not depend on which
 * file the code ended up in. Undefined where there is no package around it (the single
 * executable's CommonJS bundle has no import.meta.url).
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export function packageRoot(moduleUrl: string | undefined): string | undefined {
  if (moduleUrl === undefined) return undefined;
  let dir = dirname(fileURLToPath(moduleUrl));
  for (;;) {
    if (existsSync(join(dir, "package.json"))) return dir;
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}
