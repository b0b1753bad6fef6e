# syntax=docker/dockerfile:1
#
# fnr's runner image with the real catalog functions Porch ships: the ten function binaries Porch's
# own runner image holds, at the same versions, copied from the catalog's own images
# (/usr/local/bin/function) to /home/nonroot/functions/<name> as Porch's Dockerfile does, and
# functions/catalog.yaml as /home/nonroot/config.yaml (the paths Porch's Deployment passes). fnr's own
# Node.js functions stay in /app/functions under fnr's own image names (functions/config.yaml).
#
#   docker build -f docker/fnr.Dockerfile -t fnr:v0.1.0 .
#   docker build -f docker/fnr-catalog.Dockerfile --build-arg FNR_IMAGE=fnr:v0.1.0 -t fnr:v0.1.0-catalog .
#
# Not built in the development environment (no Docker engine and no registry there); the tests run
# the same mapping against the binaries built from the catalog's Go modules (docs/catalog-functions.md).

ARG FNR_IMAGE=fnr:v0.1.0
ARG CATALOG=ghcr.io/kptdev/krm-functions-catalog

FROM ${CATALOG}/apply-setters:v0.2.2 AS apply-setters
FROM ${CATALOG}/ensure-name-substring:v0.2.1 AS ensure-name-substring
FROM ${CATALOG}/search-replace:v0.2.1 AS search-replace
FROM ${CATALOG}/set-annotations:v0.1.5 AS set-annotations
FROM ${CATALOG}/set-image:v0.1.2 AS set-image
FROM ${CATALOG}/set-labels:v0.2.2 AS set-labels
FROM ${CATALOG}/set-namespace:v0.4.2 AS set-namespace
FROM ${CATALOG}/set-project-id:v0.2.1 AS set-project-id
FROM ${CATALOG}/starlark:v0.5.2 AS starlark
FROM ${CATALOG}/upsert-resource:v0.2.1 AS upsert-resource

FROM ${FNR_IMAGE}
USER 0:0
COPY --from=apply-setters         --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/apply-setters
COPY --from=ensure-name-substring --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/ensure-name-substring
COPY --from=search-replace        --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/search-replace
COPY --from=set-annotations       --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/set-annotations
COPY --from=set-image             --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/set-image
COPY --from=set-labels            --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/set-labels
COPY --from=set-namespace         --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/set-namespace
COPY --from=set-project-id        --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/set-project-id
COPY --from=starlark              --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/starlark
COPY --from=upsert-resource       --chown=root:root --chmod=555 /usr/local/bin/function /home/nonroot/functions/upsert-resource
COPY --chown=root:root --chmod=444 functions/catalog.yaml /home/nonroot/config.yaml
USER 65532:65532
