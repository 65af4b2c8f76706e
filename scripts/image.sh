#!/usr/bin/env bash
# Builds gpuarena's container images from deploy/Containerfile with whichever of docker, podman
# or buildah is installed (GPUARENA_BUILDER=podman picks one):
#   bash scripts/image.sh server    -> gpuarena-server  (the API server; CPU only)
#   bash scripts/image.sh runner    -> gpuarena-runner  (the runner: CUDA, bubblewrap, torch with CUDA)
#   bash scripts/image.sh runner-cpu -> gpuarena-runner-cpu (a CPU-only runner: the server image and bubblewrap)
# Further arguments go to the builder, e.g. another base or a local torch wheel:
#   bash scripts/image.sh server --build-arg SERVER_BASE=localhost/bookworm-python:3.11 \
#       -v /opt/wheels:/wheels:ro --build-arg TORCH_PIP_ARGS="--find-links /wheels"
# GPUARENA_IMAGE_TAG names the image (default gpuarena-<target>).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "image: $*" >&2; }
target=${1:-}
case "$target" in
  server|runner|runner-cpu) shift ;;
  *) say "usage: bash scripts/image.sh server|runner|runner-cpu [builder arguments...]"; exit 2 ;;
esac
tag=${GPUARENA_IMAGE_TAG:-gpuarena-$target}
builder=${GPUARENA_BUILDER:-}
if [ -z "$builder" ]; then
  # docker only where its daemon answers (the CLI alone cannot build)
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then builder=docker
  elif command -v podman >/dev/null 2>&1; then builder=podman
  elif command -v buildah >/dev/null 2>&1; then builder=buildah
  else say "none of docker (with a running daemon), podman or buildah is installed"; exit 1
  fi
fi
case "$builder" in
  docker) cmd=(docker build) ;;
  # --format docker keeps the HEALTHCHECK (OCI image configs have no place for it)
  podman) cmd=(podman build --format docker) ;;
  buildah) cmd=(buildah build --format docker) ;;
  *) say "GPUARENA_BUILDER=$builder: use docker, podman or buildah"; exit 2 ;;
esac
say "building $tag (target $target) with $builder"
start=$(date +%s)
"${cmd[@]}" -f deploy/Containerfile --target "$target" -t "$tag" "$@" .
say "built $tag in $(( $(date +%s) - start )) s"
