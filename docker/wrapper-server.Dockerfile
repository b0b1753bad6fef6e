# syntax=docker/dockerfile:1
#
# The wrapper-server image (WRAPPER_SERVER_IMAGE): the init container of every function pod copies
# its self-contained wrapper folder into the pod's emptyDir, and the function container runs
# /wrapper-server-tools/wrapper-server from there. See docker/README.md.
#
#   docker build -f docker/wrapper-server.Dockerfile -t fnr-wrapper-server .
#
# The folder is made by the same script as `npm run package:wrapper` (scripts/package-wrapper.mjs),
# from this stage's node binary and Debian's glibc, patchelf and binutils; gcc and libc6-dev build
# the native spawn helper into it (native/fnr-spawn.c, linked statically: fnr-spawn).

ARG NODE_IMAGE=node:26-bookworm-slim

FROM ${NODE_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends patchelf binutils busybox-static gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY proto proto
COPY src src
COPY native native
COPY scripts scripts
# the launcher: /wrapper-server-tools/wrapper-server (runs the executable, reaps zombies as PID 1)
COPY docker/wrapper-launcher.sh docker/wrapper-launcher.sh
# /home/nonroot/wrapper-server is where Porch's templates copy from (Porch's own
# wrapper-server image keeps wrapper-server and grpc-health-probe there): the folder itself is
# there, /wrapper-server is a link to it. Everything is readable and runnable by any uid (the init
# container runs as the image's user, Porch's templates set none; the function container as the
# function image's).
RUN node scripts/package-wrapper.mjs --out /out/rootfs/home/nonroot/wrapper-server \
 && test -x /out/rootfs/home/nonroot/wrapper-server/fnr-spawn \
 && chmod -R a+rX /out/rootfs/home
# The final image has no shell or libc: a static busybox gives the init container `cp`.
RUN mkdir -p /out/rootfs/bin \
 && cp /bin/busybox /out/rootfs/bin/busybox \
 && for applet in sh cp ls cat; do ln -s busybox "/out/rootfs/bin/$applet"; done \
 && ln -s /home/nonroot/wrapper-server /out/rootfs/wrapper-server \
 && mkdir -p /out/rootfs/licenses \
 && cp /usr/share/doc/busybox-static/copyright /out/rootfs/licenses/busybox-static.copyright

FROM scratch
COPY --from=build /out/rootfs/ /
USER 65532:65532
# What the init container does (fnr's and Porch's templates pass this command explicitly).
CMD ["cp", "-a", "/home/nonroot/wrapper-server/.", "/wrapper-server-tools"]
