#!/usr/bin/env bash
# The offline data of the CPU tiers that comes from Debian packages: Fashion-MNIST (the image
# benchmarks' items) and espeak-ng (the speech benchmark's synthesized utterances). Idempotent;
# without root or apt-get it says what to install and leaves the rest of the install alone.
set -euo pipefail
PACKAGES=(dataset-fashion-mnist espeak-ng)
missing=()
for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "install_datasets: the image and speech tiers need the Debian packages ${missing[*]}; install them (apt-get install ${missing[*]})" >&2
  exit 0
fi
echo "install_datasets: installing ${missing[*]} (apt-get)" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
