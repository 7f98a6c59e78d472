#!/bin/sh
# Install the packaged triage app for the current user (no root needed):
#
#   ~/.local/opt/triage/                                  the one-folder app
#   ~/.local/bin/triage                                   a symlink to its executable
#   ~/.local/share/applications/triage.desktop            the menu entry ("Triage")
#   ~/.local/share/icons/hicolor/scalable/apps/triage.svg the icon (+ a 48x48 PNG)
#
# Usage:
#   ./install.sh                     from an unpacked release (the app is ./triage)
#   packaging/install.sh APP_DIR     from a checkout: the release folder or its triage/ folder
#   install.sh --prefix DIR ...      install under DIR instead of ~/.local
#   install.sh --uninstall           remove all of the above
#
# Models are not touched: they live in the user data folder (~/.local/share/triage/models).
set -eu

PREFIX=$HOME/.local
SHARE=
ACTION=install
APP=

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; PREFIX=$2; SHARE=$2/share; shift 2 ;;
    --prefix=*) PREFIX=${1#--prefix=}; SHARE=$PREFIX/share; shift ;;
    --uninstall) ACTION=uninstall; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) APP=$1; shift ;;
  esac
done
# The XDG data dir is where menus look; honour it unless an explicit prefix was given.
[ -n "$SHARE" ] || SHARE=${XDG_DATA_HOME:-$HOME/.local/share}

BIN=$PREFIX/bin
OPT=$PREFIX/opt/triage
DESKTOP=$SHARE/applications/triage.desktop
SVG=$SHARE/icons/hicolor/scalable/apps/triage.svg
PNG=$SHARE/icons/hicolor/48x48/apps/triage.png

refresh_menus() {
  # Optional tools: menus pick the entry up without them, only later.
  if command -v update-desktop-database >/dev/null 2>&1; then
    update-desktop-database -q "$SHARE/applications" 2>/dev/null || true
  fi
  if command -v gtk-update-icon-cache >/dev/null 2>&1 && [ -f "$SHARE/icons/hicolor/index.theme" ]; then
    gtk-update-icon-cache -q -t -f "$SHARE/icons/hicolor" 2>/dev/null || true
  fi
}

if [ "$ACTION" = uninstall ]; then
  # Only remove the symlink if it is ours, never a triage installed some other way (pipx).
  if [ -L "$BIN/triage" ] && [ "$(readlink "$BIN/triage")" = "$OPT/triage" ]; then rm -f "$BIN/triage"; fi
  rm -rf "$OPT"
  rm -f "$DESKTOP" "$SVG" "$PNG"
  refresh_menus
  say "removed triage from $PREFIX (models in ~/.local/share/triage were kept)"
  exit 0
fi

# Find the app folder: the argument, or ./triage beside this script (an unpacked release).
if [ -z "$APP" ]; then APP=$(dirname "$0")/triage; fi
if [ -d "$APP/triage" ] && [ -x "$APP/triage/triage" ]; then APP=$APP/triage; fi
[ -x "$APP/triage" ] && [ -d "$APP/_internal" ] \
  || die "no built app in $APP (want APP_DIR/triage and APP_DIR/_internal); build it with: python3 packaging/build.py"
APP=$(cd "$APP" && pwd -P)
ASSETS=$APP/_internal/triage/assets
for f in triage.desktop triage.svg triage.png; do
  [ -f "$ASSETS/$f" ] || die "the app lacks its asset $f ($ASSETS); rebuild it"
done

# Refuse early, with the runtime check's own message, on a CPU this build cannot run on.
"$APP/triage" --version >/dev/null || die "$APP/triage does not run on this machine (see the message above)"

# Copy beside the old install, then swap, so a failed copy leaves the old one working.
mkdir -p "$PREFIX/opt" "$BIN"
rm -rf "$OPT.new" "$OPT.old"
cp -R "$APP" "$OPT.new"
if [ -e "$OPT" ]; then mv "$OPT" "$OPT.old"; fi
mv "$OPT.new" "$OPT"
rm -rf "$OPT.old"
ln -sfn "$OPT/triage" "$BIN/triage"

# The menu entry runs the absolute path: a desktop session's PATH often lacks ~/.local/bin.
mkdir -p "$(dirname "$DESKTOP")" "$(dirname "$SVG")" "$(dirname "$PNG")"
sed -e "s|^Exec=triage\$|Exec=$BIN/triage|" -e "s|^TryExec=triage\$|TryExec=$BIN/triage|" \
  "$ASSETS/triage.desktop" > "$DESKTOP.tmp"
mv "$DESKTOP.tmp" "$DESKTOP"
cp "$ASSETS/triage.svg" "$SVG"
cp "$ASSETS/triage.png" "$PNG"
refresh_menus

say "app:        $OPT"
say "command:    $BIN/triage -> $OPT/triage ($("$BIN/triage" --version))"
say "menu entry: $DESKTOP (\"Triage\", opens in your terminal emulator)"
say "icon:       $SVG"
case ":$PATH:" in
  *":$BIN:"*) ;;
  *) say "note: $BIN is not on your PATH; add it (e.g. in ~/.profile: PATH=\"\$HOME/.local/bin:\$PATH\") to type 'triage'" ;;
esac
say "first run: 'triage' offers to download a model, or use: triage --model /path/to/model.gguf"
