#!/usr/bin/env bash
# Packs Debian 12's Open MPI runtime for a Linux machine without Open MPI (e.g. a GPU machine
# where nothing can be installed), relocatable with OPAL_PREFIX:
#   scripts/mpi-bundle.sh PREFIX
#   (carry PREFIX there)  source PREFIX/env.sh && mpirun -np 2 kinfer batch ...
# Run it where Debian's openmpi-bin and libopenmpi3 are installed (scripts/install-deps.sh). PREFIX
# mirrors Open MPI's configured layout under /usr (ompi_info --path all): bin/ (mpirun, mpiexec,
# orterun, orted, ompi_info), lib/x86_64-linux-gnu/ (Open MPI's libraries and every library they
# and the shipped MCA plugins need beyond glibc, zlib and libgcc_s), its openmpi/lib/openmpi3/
# (the MCA plugins whose libraries are shipped: not those of UCX, libfabric, verbs, PSM, netlink
# or OpenSHMEM), its pmix2/ (PMIx's plugins and help), share/openmpi/ (help texts) and
# etc/openmpi/ (the MCA defaults: one host, shared memory, no binding). PREFIX/env.sh sets
# OPAL_PREFIX and the rest. Nothing is compressed; man pages, headers, static libraries, compiler
# wrappers, Fortran and Java are left out.
# See docs/cluster.md "A machine without Open MPI".
set -euo pipefail
out=${1:?usage: scripts/mpi-bundle.sh PREFIX}
arch=x86_64-linux-gnu
src=/usr/lib/$arch
ompi=$src/openmpi/lib/openmpi3  # Open MPI's pkglibdir (its MCA plugins)
pmix=$src/pmix2                  # PMIx's prefix (Debian's libpmix2)
for f in /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$src/libmpi.so.40" "$ompi/mca_pmix_ext3x.so" \
         "$pmix/lib/libpmix.so.2" /usr/share/openmpi/help-orterun.txt /etc/openmpi/openmpi-mca-params.conf; do
  [ -e "$f" ] || { echo "mpi-bundle: no $f (install Debian's openmpi-bin and libopenmpi3)" >&2; exit 1; }
done
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
# PREFIX is replaced: only an earlier bundle (it has env.sh) or an empty folder.
if [ -e "$out" ] && [ ! -f "$out/env.sh" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "mpi-bundle: $out exists and is not an earlier bundle; give a new or empty folder" >&2
  exit 1
fi
rm -rf "$out"
lib=$out/lib/$arch
mkdir -p "$out/bin" "$lib/openmpi/lib/openmpi3" "$lib/pmix2/lib/pmix" "$lib/pmix2/share/pmix" \
         "$lib/hwloc" "$out/share/openmpi" "$out/etc/openmpi"

# Executables: mpirun and mpiexec are orterun; orted starts ranks on other hosts.
cp /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$out/bin/"
ln -s orterun "$out/bin/mpirun"
ln -s orterun "$out/bin/mpiexec"

# Libraries, by their sonames. Assumed on any glibc Linux (not shipped): glibc itself, zlib and
# libgcc_s (Ubuntu's required packages). libudev (needed by hwloc) is shipped: minimal images lack it.
system='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libz|libgcc_s)\.so\.[0-9]+$|^ld-linux-x86-64\.so\.2$|^linux-vdso\.so\.1$'
libs="libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 libmca_common_sm.so.40 libmca_common_ompio.so.41
      libmca_common_monitoring.so.50 libhwloc.so.15 libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7
      libpmix.so.2 libmunge.so.2 libudev.so.1"
for l in $libs; do cp -L "$src/$l" "$lib/$l"; done

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
# A plugin is shipped when every library it needs is shipped or on every machine.
shippable() {
  local n
  for n in $(needed "$1"); do
    [ -e "$lib/$n" ] || [[ "$n" =~ $system ]] || return 1
  done
}
skipped=()
for p in "$ompi"/*.so; do
  if shippable "$p"; then cp "$p" "$lib/openmpi/lib/openmpi3/"; else skipped+=("$(basename "$p" .so)"); fi
done
for p in "$pmix"/lib/pmix/*.so; do
  shippable "$p" && cp "$p" "$lib/pmix2/lib/pmix/" || skipped+=("$(basename "$p" .so)")
done

# Help texts (every error message of mpirun and PMIx is printed from them) and the MCA defaults.
cp /usr/share/openmpi/help-*.txt "$out/share/openmpi/"
cp "$pmix"/share/pmix/help-*.txt "$lib/pmix2/share/pmix/"
cp /etc/openmpi/openmpi-default-hostfile "$out/etc/openmpi/"
cat > "$out/etc/openmpi/openmpi-mca-params.conf" <<'CONF'
# scripts/mpi-bundle.sh (in place of Debian's /etc/openmpi/openmpi-mca-params.conf): ranks on one
# host without InfiniBand talk through shared memory (vader; for several hosts add tcp:
# --mca btl self,vader,tcp); no single-copy (CMA needs ptrace, which containers often forbid);
# ranks are not bound to a core each (kinfer batch's job processes and pe's threads use many);
# more ranks than cores are allowed. A --mca option or OMPI_MCA_* variable overrides any of them.
btl = self,vader
pml = ob1
osc = ^pt2pt
btl_base_warn_component_unused = 0
btl_vader_single_copy_mechanism = none
hwloc_base_binding_policy = none
rmaps_base_oversubscribe = 1
CONF
# PMIx's own defaults only name Debian's plugin folder (env.sh sets the bundle's).
: > "$lib/pmix2/share/pmix-mca-params.conf"

cat > "$out/env.sh" <<'ENV'
# source PREFIX/env.sh (bash or zsh): the bundled Open MPI (scripts/mpi-bundle.sh) on PATH,
# relocated to wherever PREFIX now is.
if [ -n "${BASH_VERSION:-}" ]; then eval '_mpi_here=${BASH_SOURCE[0]}'
elif [ -n "${ZSH_VERSION:-}" ]; then eval '_mpi_here=${(%):-%x}'
else echo "env.sh: source it from bash or zsh" >&2; return 1 2>/dev/null || exit 1; fi
_mpi_here=$(cd "$(dirname "$_mpi_here")" && pwd)
export OPAL_PREFIX="$_mpi_here"
export OPAL_SYSCONFDIR="$_mpi_here/etc/openmpi"          # the MCA defaults (not /etc/openmpi)
export PMIX_PREFIX="$_mpi_here/lib/x86_64-linux-gnu/pmix2"  # PMIx's folders: Debian configured
export PMIX_EXEC_PREFIX="$PMIX_PREFIX" PMIX_LIBDIR="$PMIX_PREFIX/lib"   # them by absolute path
export PMIX_PKGLIBDIR="$PMIX_PREFIX/lib/pmix" PMIX_SYSCONFDIR="$PMIX_PREFIX/share"
export PMIX_DATADIR="$PMIX_PREFIX/share" PMIX_PKGDATADIR="$PMIX_PREFIX/share/pmix"
export HWLOC_PLUGINS_PATH="$_mpi_here/lib/x86_64-linux-gnu/hwloc"  # none: no GL/OpenCL/PCI probing
export HWLOC_HIDE_ERRORS=1   # hwloc's complaints about a VM's or container's odd topology
export PATH="$_mpi_here/bin:$PATH"
export LD_LIBRARY_PATH="$_mpi_here/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! command -v ssh >/dev/null 2>&1 && ! command -v rsh >/dev/null 2>&1; then
  export OMPI_MCA_plm=isolated  # no ssh: mpirun would refuse to start even on one host
fi
if [ "$(id -u)" = 0 ]; then  # Open MPI refuses root unless told (containers run as root)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
unset _mpi_here
ENV

# Every shipped executable and library must find its libraries in the bundle or the system set.
bad=0
while IFS= read -r f; do
  while read -r name path; do
    [[ "${name##*/}" =~ $system ]] && continue
    case "$path" in "$lib"/*) ;; *) echo "mpi-bundle: $f needs $name from $path" >&2; bad=1 ;; esac
  done < <(LD_LIBRARY_PATH="$lib" ldd "$f" | awk '/=>/{print $1, $3; next} {print $1, $1}')
done < <(find "$out/bin" "$lib" -type f \( -perm -u+x -o -name '*.so*' \))
[ "$bad" = 0 ] || exit 1
echo "mpi-bundle: left out (they need UCX, libfabric, verbs, PSM, libnl or OpenSHMEM): ${skipped[*]}"
du -sh "$out"
