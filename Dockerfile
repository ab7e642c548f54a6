# syntax=docker/dockerfile:1
# etcd-guard: one image for the webhook (`webhook ...`) and the CronJob (`evaluate ...`).
# The CLI is TypeScript run through tsx (a runtime dependency), so there is no compile step to
# ship; the build stage type-checks the sources as a gate. No secrets enter any layer: certs and
# config are mounted at run time.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY functions ./functions
COPY webhook ./webhook
RUN npx tsc -p tsconfig.build.json --noEmit

FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    TMPDIR=/tmp
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/package.json /app/tsconfig.json ./
COPY --from=build /app/bin ./bin
COPY --from=build /app/functions ./functions
COPY --from=build /app/webhook ./webhook
# The numeric user the manifests' runAsUser names; it owns nothing in /app, so the code is
# read-only to it even without readOnlyRootFilesystem.
USER 10001:10001
EXPOSE 8443
ENTRYPOINT ["node", "bin/etcd-guard.mjs"]
CMD ["--help"]
