#!/bin/sh
# The images' entry point: `gpuarena "$@"`, after reading secrets from files. For each of
# GPUARENA_DATABASE_URL and GPUARENA_SECRET_KEY, a variable NAME_FILE (a mounted secret: compose's
# /run/secrets/..., a Kubernetes Secret volume) sets NAME to the file's content, so the database
# password and the session key are neither in the image, nor on a command line, nor in the
# container's configuration. The runner reads its token file itself (GPUARENA_TOKEN_FILE).
set -eu
for name in GPUARENA_DATABASE_URL GPUARENA_SECRET_KEY; do
  eval "file=\${${name}_FILE:-}"
  if [ -n "$file" ]; then
    if ! value=$(cat "$file"); then
      echo "gpuarena-entrypoint: ${name}_FILE=$file cannot be read" >&2
      exit 1
    fi
    export "$name=$value"
    unset "${name}_FILE"
  fi
done
exec gpuarena "$@"
