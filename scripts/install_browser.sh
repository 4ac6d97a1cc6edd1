#!/usr/bin/env bash
# Installs Debian's chromium and chromedriver for the browser tests of tests/report (selenium
# drives /usr/bin/chromium through /usr/bin/chromedriver). Idempotent: does nothing when both are there.
set -euo pipefail

if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    echo "install_browser: chromium and chromedriver already installed"
    exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "install_browser: run as root or install sudo" >&2; exit 1; }
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver
/usr/bin/chromium --version
/usr/bin/chromedriver --version
