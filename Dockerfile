# syntax=docker/dockerfile:1
# sidecar-terminator: the webhook and the watcher (`serve`), and `lint`, in one image.
# The signal mechanism's ephemeral container runs another image, stop-sidecar (one static Go
# program from images/stop-sidecar), published beside this one with the same tag.
#   docker build -t sidecar-terminator:0.1.0 .
# scripts/build-images.ts assembles the same content without Docker (the real-node tests run
# it), and test/chart/image.test.ts runs these steps (bundle, start) without Docker.

ARG NODE_IMAGE=node:24-bookworm-slim

# 1. Bundle src/ into dist/ with esbuild (scripts/bundle.ts), from the full dependency tree.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --strict-allow-scripts --no-audit --no-fund
COPY scripts/bundle.ts ./scripts/
COPY src ./src
RUN npm run build

# 2. The runtime: Node.js and the bundles; no node_modules, no npm, no sources. package.json
# gives the version and says the bundles are ES modules.
FROM ${NODE_IMAGE}
# NODE_COMPILE_CACHE: Node keeps the bytecode of the bundles it compiles in that directory and
# reads it at the next start: a container started again (a crash, an OOM kill, a probe's
# restart) is ready sooner and holds less memory of the compiler's. /tmp is the pod's own
# writable volume in the chart; where it is not writable, Node starts without the cache.
ENV NODE_ENV=production NODE_COMPILE_CACHE=/tmp/node-compile-cache
WORKDIR /app
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg
COPY --from=build /src/dist ./dist
COPY package.json ./
# The node image's unprivileged user, by number so that runAsNonRoot can verify it.
USER 1000:1000
# Node's flags, if any, go between node and the script (scripts/build-images.ts and the benchmarks
# read them here). None: a smaller young generation saves the webhook 8 to 14 MiB but costs it 13%
# or more of its admission capacity. The chart gives the watcher, which allocates little, its own
# (NODE_OPTIONS and MALLOC_ARENA_MAX in watcher.env; bench/README.md, section 0).
ENTRYPOINT ["node", "/app/dist/cli.js"]
CMD ["serve"]
