#!/usr/bin/env bash
# Packs a release build for a GPU machine that lacks kinfer's Debian libraries:
#   scripts/device-bundle.sh BUILD_DIR BUNDLE_DIR
# copies kinfer and the benchmark drivers built in BUILD_DIR (at their paths under the build),
# the shared libraries they link that such a machine may lack (spdlog, fmt, CLI11, Boost, zlib)
# into BUNDLE_DIR/lib, the shipped GPU profiles into BUNDLE_DIR/data/profiles (found beside the
# executable), and wrappers: BUNDLE_DIR/run apps/kinfer pe NETWORK, or BUNDLE_DIR/kinfer pe NETWORK.
# Build for such a machine with -Dcuda=enabled -Dmpi=disabled (Open MPI is not there), or with
# -Dmpi=enabled and carry Open MPI too: scripts/mpi-bundle.sh PREFIX, then source PREFIX/env.sh there.
set -euo pipefail
build=${1:?usage: scripts/device-bundle.sh BUILD_DIR BUNDLE_DIR}
out=${2:?usage: scripts/device-bundle.sh BUILD_DIR BUNDLE_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out"
mkdir -p "$out/lib" "$out/data/profiles"
for f in apps/kinfer bench/gpu/bucket_bench bench/kernel/cpu_kernel_bench bench/order/order_bench \
         bench/linkage/chain_step bench/scheduler/repredict bench/scheduler/refit \
         tests/test_gpu_kernel tests/test_gpu_chain; do
  [ -x "$build/$f" ] || continue
  mkdir -p "$out/$(dirname "$f")"
  cp "$build/$f" "$out/$f"
  ldd "$build/$f" | awk '/=> \//{print $3}' |
    grep -E 'libspdlog|libfmt|libCLI11|libboost|libz\.' | xargs -r -I{} cp -L {} "$out/lib/" || true
done
[ -x "$out/apps/kinfer" ] || { echo "device-bundle: no $build/apps/kinfer" >&2; exit 1; }
if ldd "$out/apps/kinfer" | grep -q libmpi; then
  echo "device-bundle: $build links Open MPI; on a machine without it, carry scripts/mpi-bundle.sh's" \
       "bundle too and source its env.sh (or build with -Dmpi=disabled)" >&2
fi
cp "$here"/data/profiles/h*.json "$out/data/profiles/"
cat > "$out/run" <<'RUN'
#!/usr/bin/env bash
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
prog=$1
shift
exec "$here/$prog" "$@"
RUN
chmod +x "$out/run"
# One word for kinfer itself (scripts/bench.py --kinfer BUNDLE_DIR/kinfer).
cat > "$out/kinfer" <<'KINFER'
#!/usr/bin/env bash
exec "$(cd "$(dirname "$0")" && pwd)/run" apps/kinfer "$@"
KINFER
chmod +x "$out/kinfer"
du -sh "$out"
