# bootseal serve in a container. Not built on the machine bootseal is developed on (it has no
# Docker engine): checked by reading, and its run-time settings (environment, paths, health
# check) by running dist/cli/main.js the same way outside a container.
#
#   docker build -t bootseal .
#   docker run --read-only -p 7480:7480 -v bootseal-data:/var/lib/bootseal bootseal
#
# The embedded default (no config file) keeps its store, age identity, controller token and
# audit log under /var/lib/bootseal; BOOTSEAL_* variables configure the rest
# (docs/configuration.md, docker-compose.yml). A bind mount instead of a volume must be
# writable by uid 10001.

# ---- build: bundle dist/ and keep the production dependencies only ----
FROM node:24.21.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts, because of what the lifecycle scripts would do here:
#  - the `node` devDependency's preinstall runs `npm install node-linux-<arch>@24.21.0`, a
#    second ~50 MB download of the Node this base image already has (that package only pins
#    Node for developers whose system Node is older);
#  - the root `prepare` script runs `npm run build` before the sources are copied (and would
#    run again below);
#  - esbuild's postinstall only checks its binary and swaps its JS shim for it; the binary
#    itself is the platform's optional dependency (@esbuild/linux-x64 / -arm64), which npm
#    installs without scripts, and the JS API used by scripts/bundle.ts finds it;
#  - protobufjs's postinstall only checks the versions of its optional CLI's dependencies.
# The build then runs on the base image's Node 24: npm puts node_modules/.bin first on PATH,
# but node_modules/.bin/node is missing or dangling (the binary it points to comes from the
# skipped preinstall), so sh finds /usr/local/bin/node (Node 24 strips the types of
# scripts/bundle.ts itself).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts/bundle.ts ./scripts/
COPY src ./src
COPY providers ./providers
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
 && node dist/cli/main.js --version

# ---- runtime ----
FROM node:24.21.0-bookworm-slim
# npm, npx and corepack are not needed to run the service.
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
 && groupadd --system --gid 10001 bootseal \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/bootseal --no-create-home \
      --shell /usr/sbin/nologin bootseal \
 && mkdir -p /var/lib/bootseal \
 && chown 10001:10001 /var/lib/bootseal \
 && chmod 0700 /var/lib/bootseal
# Application files stay owned by root: the service cannot change its own code.
COPY --from=build /app/package.json /app/package.json
COPY --from=build /app/node_modules /app/node_modules
COPY --from=build /app/dist /app/dist
# Read-only root file system friendly: the only writes go to /var/lib/bootseal (the volume;
# also the working directory, so relative paths in a config land there). bootseal enables V8's
# compile cache, which would write under os.tmpdir(): off here (a long-running server gains
# little from it). HOME points into the volume too, should a library look there.
ENV NODE_ENV=production \
    NODE_DISABLE_COMPILE_CACHE=1 \
    HOME=/var/lib/bootseal
WORKDIR /var/lib/bootseal
VOLUME ["/var/lib/bootseal"]
USER 10001:10001
EXPOSE 7480
# Node's built-in fetch (no curl in slim images). Plain HTTP on port 7480: change it together
# with --listen, or with tls.* (then probe https:// with the CA).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:7480/healthz',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The heap flags npm start uses (docs/benchmarks.md, "Memory"): an 8 MiB young generation, and
# the old generation's limit grown 2x after a collection (V8 picks up to 4x on its own). They
# cut a 10,000-machine boot storm's peak RSS by about a quarter for 2-4 % of its rate.
ENTRYPOINT ["node", "--max-semi-space-size=8", "--heap-growing-percent=100", "/app/dist/cli/main.js"]
CMD ["serve", "--listen", "0.0.0.0:7480", "--data-dir", "/var/lib/bootseal"]
