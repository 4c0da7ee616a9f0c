# Sourced by the GPU machine's scripts: when the archive of Debian packages
# made by tools/cuda/pack_host_deps.sh exists ($DEPS_ARCHIVE, default
# .carry/cuda/deps.tar.xz), unpacks it once at /tmp/hyllm-deps and points
# pkg-config, CMake and the dynamic loader at it.
DEPS_ARCHIVE=${HYLLM_DEPS_ARCHIVE:-$ROOT/.carry/cuda/deps.tar.xz}
if [[ -f "$DEPS_ARCHIVE" ]]; then
  D=/tmp/hyllm-deps
  [[ -d $D/usr ]] || { mkdir -p $D && tar -xJf "$DEPS_ARCHIVE" -C $D; }
  export PKG_CONFIG=$D/usr/bin/pkgconf
  export PKG_CONFIG_LIBDIR=$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:$D/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu:$D/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export CMAKE_PREFIX_PATH=$D/usr
  export CMAKE_POLICY_VERSION_MINIMUM=3.5
fi
