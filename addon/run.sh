#!/bin/sh
# For running the add-on's entry by hand inside the image (the image's CMD does the same).
# Options come from /data/options.json; see runner/addon-options.ts for the mapping.
set -eu
cd /app
exec node --import tsx runner/addon-main.ts
