# syntax=docker/dockerfile:1
#
# The fnr image: `fnr serve` (manifests/deployment.yaml) and the `fnr pods …` operator commands.
#
#   docker build -f docker/fnr.Dockerfile -t fnr:v0.1.0 .
#
# Multi-stage: build with the dev dependencies, then a runtime stage with production dependencies
# only, tini as PID 1 (signals reach node, zombies are reaped), user 65532 (non-root), and the
# functions fnr ships as the exec runtime's defaults (/home/nonroot/config.yaml and
# /home/nonroot/functions, the paths Porch's Deployment passes).
#
# Porch's function-runner Deployment works with only its image swapped for this one
# (docs/porch-swap.md): it runs /home/nonroot/server with the runner's flags (`fnr serve`) and
# probes readiness with /home/nonroot/grpc-health-probe -addr localhost:9445, as user 10001. Every
# file the runner reads is readable by any user (no write access is needed outside /tmp).
# Not built in the development environment (no Docker engine there).

ARG NODE_IMAGE=node:26-bookworm-slim

FROM ${NODE_IMAGE} AS build
# gcc and the libc headers: `npm run build` compiles the native spawn helper (native/fnr-spawn.c)
# into dist/native/fnr-spawn, which `fnr serve` starts functions through (docs/process.md).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY bin bin
COPY proto proto
COPY scripts scripts
COPY src src
COPY native native
COPY functions functions
COPY manifests/function-config/crds manifests/function-config/crds
COPY docker/porch docker/porch
RUN npm run build \
 && test -x dist/native/fnr-spawn \
 && npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force

FROM ${NODE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini libjemalloc2 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --home-dir /home/nonroot --create-home --shell /usr/sbin/nologin nonroot
ENV NODE_ENV=production
# jemalloc instead of glibc's malloc (docs/limits.md, "The allocator"): it reuses the pages of
# freed buffers while calls come, and gives them back to the system a second after they stop being
# used (background_thread, dirty_decay_ms), so what a burst of large calls or a slowloris client made
# the runner allocate is not left charged to its 1 GiB limit. glibc gave memory back only with every
# buffer of 64 KiB or more mapped and unmapped on its own, which made each 5 MiB call cost 2-3x the
# CPU (bench/allocator.ts). A bare name: the loader finds it in the library path on every
# architecture. Function processes do not inherit it (they get a minimal environment).
ENV LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0
WORKDIR /app
COPY --from=build /src/package.json /src/oclif.manifest.json ./
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/bin bin
# (dist/native/fnr-spawn, the native spawn helper, comes with dist)
COPY --from=build /src/dist dist
COPY --from=build /src/proto proto
COPY --from=build /src/functions functions
# the FunctionConfig CRD: fnr validates FunctionConfigs against its schema (src/lib/schema/function-config.ts)
COPY --from=build /src/manifests/function-config/crds manifests/function-config/crds
# The exec runtime's defaults, where Porch's Deployment points --config and --functions.
COPY --from=build --chown=65532:65532 /src/functions /home/nonroot/functions
COPY --from=build --chown=65532:65532 /src/functions/config.yaml /home/nonroot/config.yaml
# Porch's Deployment: its command and its readiness probe (any uid; Porch runs them as 10001).
COPY --from=build /src/docker/porch/server /home/nonroot/server
COPY --from=build /src/docker/porch/grpc-health-probe /home/nonroot/grpc-health-probe
# The shipped functions import `yaml`; Node looks for it in node_modules above the script.
RUN ln -s /app/node_modules /home/nonroot/node_modules
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 9445
# --expose-gc and --disable-sigusr1: what `fnr serve` needs on its command line (bin/run.js re-runs
# itself with them when they are missing, as from /home/nonroot/server; here there is no re-run).
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--expose-gc", "--disable-sigusr1", "/app/bin/run.js"]
CMD ["serve", "--config=/home/nonroot/config.yaml", "--functions=/home/nonroot/functions"]
