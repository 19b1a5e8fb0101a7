# syntax=docker/dockerfile:1
# sidecar-terminator: the webhook and the watcher (`serve`), and `lint`, in one image.
# It also serves as the default image of the signal mechanism's ephemeral container, which
# runs `node -e "process.kill(1, 'SIGTERM')"`: `node` must stay on the PATH.
#   docker build -t sidecar-terminator:0.1.0 .
# test/chart/image.test.ts runs the same steps (build, production install, start) without Docker.

ARG NODE_IMAGE=node:24-bookworm-slim

# 1. Compile TypeScript to dist/ with the full dependency tree.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --strict-allow-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

# 2. Production dependencies only.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# 3. The runtime: Node.js, production node_modules, dist/src; no npm, no compiler, no sources.
FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY package.json ./
# The node image's unprivileged user, by number so that runAsNonRoot can verify it.
USER 1000:1000
ENTRYPOINT ["node", "/app/dist/src/cli.js"]
CMD ["serve"]
