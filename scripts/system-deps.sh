#!/bin/sh
# Debian packages the app and its tests need beyond Python wheels:
# the libraries PySide6 loads offscreen, PostgreSQL for the server tests, a Secret Service
# (gnome-keyring + dbus) for the keyring tests, and the desktop/AppStream/Flatpak validators.
# Installs what is missing when run as root with apt-get; otherwise prints the command and fails.
set -eu

PACKAGES="libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 \
libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxcb-randr0 \
libxcb-render-util0 libxcb-image0 libxcb-xinerama0 libxcb-xkb1 fonts-dejavu-core \
postgresql gnome-keyring dbus desktop-file-utils appstream flatpak-builder"

missing=""
for pkg in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $pkg"
    fi
done

if [ -z "$missing" ]; then
    exit 0
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing system packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
    exit 0
fi

echo "Missing system packages:$missing" >&2
echo "Install them with:" >&2
echo "    sudo apt-get install -y --no-install-recommends$missing" >&2
exit 1
