# syntax=docker/dockerfile:1
# etcd-guard: one image for the webhook (`webhook ...`) and the CronJob (`evaluate ...`).
# The build stage type-checks the TypeScript (tsc --noEmit) and bundles it with esbuild
# (scripts/build.mjs) into dist/cli/ with lazily loaded chunks (etcd's gRPC definition prebuilt
# from etcd3's .proto files); the final image ships dist/ and bin/ but no sources, so
# bin/etcd-guard.mjs runs the bundle with plain node (no tsx loader: ~30 MB less resident, no
# compile at start, and `evaluate` loads neither the webhook nor the Kubernetes client). No
# secrets enter any layer: certs and config are mounted at run time.

FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would bundle before the sources are copied; the last RUN does it.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
# The build script and the esbuild plugins it imports (test/project/dockerfile.test.ts checks the list).
COPY scripts/build.mjs scripts/etcd-grpc-plugin.mjs scripts/eager-cjs.mjs ./scripts/
COPY functions ./functions
COPY webhook ./webhook
RUN npx tsc -p tsconfig.build.json --noEmit && node scripts/build.mjs

FROM node:22-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: no bundling here (no sources, no esbuild); the build stage made it.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# Node 22 LTS (Node 20 reached end of life in April 2026). The CLI enables Node's module compile
# cache in TMPDIR (/tmp, an emptyDir in the manifests): a webhook container restarted in the same
# pod starts from it; each CronJob pod fills its own.
FROM node:22-bookworm-slim
ENV NODE_ENV=production \
    TMPDIR=/tmp
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/package.json ./
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
# The numeric user the manifests' runAsUser names; it owns nothing in /app, so the code is
# read-only to it even without readOnlyRootFilesystem.
USER 10001:10001
EXPOSE 8443
# --max-semi-space-size=2: V8 grows each young-generation semi-space to 16 MiB under load; 2 MiB
# keeps the webhook's peak resident memory under 32-connection HTTPS load within its target for a
# small cost in peak requests/s (BENCHMARKS.md). --max-old-space-size-percentage=50: node sizes
# V8's old generation as half the container's cgroup memory limit, which it reads at start (left
# to itself it allows at least 256 MiB, and the machine's memory where no limit applies), so the
# heap follows the pod's `limits.memory` (docs/operations.md, "Memory"). Both are in the
# ENTRYPOINT, not NODE_OPTIONS, so every command of the image (webhook and CronJob) gets them and
# a NODE_OPTIONS set for something else does not drop them.
ENTRYPOINT ["node", "--max-semi-space-size=2", "--max-old-space-size-percentage=50", "bin/etcd-guard.mjs"]
CMD ["--help"]
