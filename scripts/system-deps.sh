#!/bin/sh
# Debian packages Fieldsync needs beyond Python wheels, in two sets:
#   run   what running the app needs: the libraries PySide6 loads (EGL/GL, xkbcommon, the xcb
#         platform plugin's libraries, fontconfig, D-Bus client library) and a font;
#   test  everything `run` has, plus what the tests need: PostgreSQL for the server tests, a
#         Secret Service (gnome-keyring + dbus) for the keyring tests, and the desktop,
#         AppStream and Flatpak validators, and for the GUI end-to-end tests an X server
#         (Xvfb), a session bus and the AT-SPI accessibility stack (python3-pyatspi), the desktop
#         services the D-Bus tests stand in with python-dbusmock (python3-dbusmock), and for the
#         office console's browser tests Chromium (Playwright drives it by its path), and
#         Node.js with npm for the tus interop tests (tus-js-client, installed by `make test`).
# Usage: sh scripts/system-deps.sh [run|test] [--list]   (default: test; --list prints the set)
# Installs what is missing when run as root with apt-get; otherwise prints the command and fails.
set -eu

RUN_PACKAGES="libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 \
libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxcb-randr0 \
libxcb-render-util0 libxcb-image0 libxcb-xinerama0 libxcb-xkb1 fonts-dejavu-core"

TEST_PACKAGES="postgresql gnome-keyring dbus desktop-file-utils appstream flatpak-builder \
xvfb xauth dbus-x11 at-spi2-core python3-pyatspi gir1.2-atspi-2.0 chromium python3-dbusmock \
nodejs"

case "${1:-test}" in
    run) PACKAGES="$RUN_PACKAGES" ;;
    test) PACKAGES="$RUN_PACKAGES $TEST_PACKAGES" ;;
    *) echo "usage: $0 [run|test] [--list]" >&2; exit 2 ;;
esac

if [ "${2:-}" = "--list" ]; then
    # shellcheck disable=SC2086
    printf '%s\n' $PACKAGES
    exit 0
fi

missing=""
for pkg in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $pkg"
    fi
done

# npm comes with NodeSource's nodejs and as a package of its own with Debian's.
if [ "${1:-test}" = "test" ] && ! command -v npm >/dev/null 2>&1; then
    missing="$missing npm"
fi

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
