#!/bin/sh
# Renders icon.png (128x128) and logo.png (250x100) for the add-on store from shapes, so the
# artwork can be changed here and re-rendered rather than edited as pixels. Needs ImageMagick 6.
set -eu
cd "$(dirname "$0")/.."
IM=${IM:-convert-im6.q16}
FONT=${FONT:-DejaVu-Sans-Bold}

# A white cloud over a blue tile, with a hexagon (a Talos node) inside the cloud.
$IM -size 512x512 -define gradient:direction=south gradient:'#2f81f7-#0b3d91' \
  \( -size 512x512 xc:black -fill white -draw 'roundrectangle 0,0 511,511 96,96' \) \
  -alpha off -compose copy_opacity -composite -compose over \
  -fill white -stroke none \
  -draw 'circle 180,290 180,212' \
  -draw 'circle 270,238 270,134' \
  -draw 'circle 356,300 356,232' \
  -draw 'roundrectangle 104,270 428,370 50,50' \
  -fill '#0b3d91' \
  -draw 'polygon 266,238 318,268 318,328 266,358 214,328 214,268' \
  -fill white \
  -draw 'polygon 266,266 294,282 294,314 266,330 238,314 238,282' \
  -resize 128x128 -depth 8 -strip icon.png

# The icon with the name beside it, on transparent ground.
$IM -size 250x100 xc:none \
  \( icon.png -resize 84x84 \) -geometry +6+8 -composite \
  -font "$FONT" -pointsize 32 -fill '#6b7c8f' -annotate +100+46 'Rezus' \
  -fill '#2f81f7' -annotate +100+82 'Cloud' \
  -depth 8 -strip logo.png
