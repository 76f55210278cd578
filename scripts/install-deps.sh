#!/usr/bin/env bash
# Installs kinfer's build and test dependencies from Debian's packages (Debian 12).
# Runs apt-get as root (directly, or through sudo). Does nothing when everything is present,
# unless --force is given.
set -euo pipefail
PKGS=(build-essential pkg-config meson ninja-build
      libboost-graph-dev libspdlog-dev libfmt-dev catch2 libcli11-dev nlohmann-json3-dev zlib1g-dev
      fastlink gnuplot-nox python3
      time  # GNU time: tests/test_memory.py's peak RSS of kinfer alone (wait4 from Python counts Python's)
      openmpi-bin libopenmpi-dev)  # optional MPI (-Dmpi=auto): `mpirun kinfer ...`, tests/test_mpi.py
if [ "${1:-}" != "--force" ]; then
  missing=()
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && exit 0
  echo "installing missing packages: ${missing[*]}" >&2
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
