#!/usr/bin/env bash
# Makes the secrets deploy/compose.yaml mounts, in deploy/secrets/ (a 0700 folder, kept out of
# git by deploy/.gitignore): db-password (PostgreSQL's), database-url (the same password, as the
# API servers' GPUARENA_DATABASE_URL), secret-key (GPUARENA_SECRET_KEY, the same on every API
# server). Files that exist are kept. The runner token comes later, from the running database:
#   docker compose -f deploy/compose.yaml run --rm migrate users add runner-1 --role runner \
#       | tail -1 > deploy/secrets/runner-token
# The files are 0444 (runner-token 0644): the containers run as uid 10001, not as you (the folder keeps others out).
set -euo pipefail
cd "$(dirname "$0")"
umask 077
mkdir -p secrets
chmod 0700 secrets
random() { python3 -c 'import secrets; print(secrets.token_urlsafe(32))'; }
[ -s secrets/db-password ] || random > secrets/db-password
[ -s secrets/database-url ] || echo "postgresql://gpuarena:$(cat secrets/db-password)@db:5432/gpuarena" > secrets/database-url
[ -s secrets/secret-key ] || random > secrets/secret-key
[ -e secrets/runner-token ] || : > secrets/runner-token   # compose wants every secret's file to exist
chmod 0444 secrets/db-password secrets/database-url secrets/secret-key
chmod 0644 secrets/runner-token   # 0644: you write it once the runner's account exists
echo "secrets in $(pwd)/secrets: $(ls secrets | tr '\n' ' ')" >&2
