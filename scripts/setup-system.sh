#!/usr/bin/env bash
# System packages that statcurator's tests and services use, from Debian's repositories.
# Idempotent: installs only what is missing, so it is cheap to run before every test run.
#
#   bash scripts/setup-system.sh        (as root, or with sudo available)
#
# - postgresql: the PostgreSQL ledger backend's tests start a throwaway server from its
#   binaries (initdb, pg_ctl) on 127.0.0.1 in a temporary directory; the tests skip the
#   PostgreSQL cases, naming this script, when the binaries are absent.
# - chromium: the web console's browser tests drive Debian's Chromium through Playwright
#   (executable_path=/usr/bin/chromium; Playwright's own browser download is not used); the
#   tests skip, naming this script, when it is absent.
set -euo pipefail

PACKAGES=(postgresql chromium)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "setup-system: nothing to install (${PACKAGES[*]} present)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

echo "setup-system: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian's package starts a cluster service; the tests run their own throwaway servers and
# need none (and CI containers have no init system): stop it if it runs.
if command -v pg_lsclusters >/dev/null 2>&1; then
    pg_lsclusters -h 2>/dev/null | while read -r version name _; do
        $SUDO pg_ctlcluster "$version" "$name" stop 2>/dev/null || true
    done
fi
echo "setup-system: done"
