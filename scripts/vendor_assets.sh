#!/usr/bin/env bash
# Re-fetches the web pages' front-end assets at their pinned versions from npm and copies the
# minified files and their licenses into the package (src/gpuarena/service/web/static/vendor/),
# where they are committed: pages never load anything from another host.
# Usage: bash scripts/vendor_assets.sh   (needs npm and the npm registry)
set -euo pipefail
cd "$(dirname "$0")/.."
HTMX=2.0.9
CHARTJS=4.6.1
HLJS=11.11.1
SWAGGER_UI=5.35.0
REDOC=2.5.4
DEST=src/gpuarena/service/web/static/vendor
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

(cd "$WORK" && npm init -y >/dev/null && npm install --no-audit --no-fund --ignore-scripts --save-exact \
  "htmx.org@$HTMX" "chart.js@$CHARTJS" "@highlightjs/cdn-assets@$HLJS" "swagger-ui-dist@$SWAGGER_UI" \
  "redoc@$REDOC" >/dev/null)
M="$WORK/node_modules"
rm -rf "$DEST" && mkdir -p "$DEST"/{htmx,chartjs,highlightjs,swagger-ui,redoc}
cp "$M/htmx.org/dist/htmx.min.js" "$M/htmx.org/LICENSE" "$DEST/htmx/"
cp "$M/chart.js/dist/chart.umd.min.js" "$M/chart.js/LICENSE.md" "$DEST/chartjs/"
cp "$M/@highlightjs/cdn-assets/highlight.min.js" "$M/@highlightjs/cdn-assets/LICENSE" "$DEST/highlightjs/"
cp "$M/@highlightjs/cdn-assets/styles/github.min.css" "$DEST/highlightjs/"
# the API's /docs and /redoc pages (FastAPI would load these from a CDN)
cp "$M/swagger-ui-dist/swagger-ui-bundle.js" "$M/swagger-ui-dist/swagger-ui.css" "$M/swagger-ui-dist/LICENSE" \
  "$DEST/swagger-ui/"
cp "$M/redoc/bundles/redoc.standalone.js" "$M/redoc/LICENSE" "$DEST/redoc/"
# Redoc's "powered by" footer loads its logo from Redocly's CDN: ours instead, so the page
# makes no request to another host
sed -i 's#https://cdn.redoc.ly/redoc/logo-mini.svg#/static/favicon.svg#g' "$DEST/redoc/redoc.standalone.js"
# the source maps are not shipped: drop the comments that would make devtools ask for them
sed -i '/^\/\/# sourceMappingURL=/d' "$DEST"/*/*.js
cat > "$DEST/VERSIONS" <<VERSIONS
htmx.org $HTMX
chart.js $CHARTJS
@highlightjs/cdn-assets $HLJS
swagger-ui-dist $SWAGGER_UI
redoc $REDOC
VERSIONS
ls -R "$DEST"
