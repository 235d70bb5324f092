# CMake toolchain: cross-build for aarch64 (GH200's Grace) with Debian's
# gcc-aarch64-linux-gnu and the arm64 multiarch -dev packages under
# /usr/lib/aarch64-linux-gnu, running tests through qemu-user. `make test-aarch64`
# (ci/test_aarch64.sh) uses it:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# qemu-user reads its CPU model from the environment: QEMU_CPU unset or "max" has SVE
# with 512-bit vectors (the SVE paths run), "max,sve-default-vector-length=16" has
# Grace's 128-bit SVE, "max,sve=off" leaves NEON.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Headers and libraries only from the arm64 side; programs (git, pkg-config) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config must read the arm64 .pc files, never the amd64 ones.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# No CUDA in the cross build: nvcc here targets x86-64 hosts (REPRODUCE.md, GH200).
set(MT_CUDA OFF CACHE BOOL "CUDA backend (not cross-built for aarch64)" FORCE)

find_program(MT_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(MT_QEMU_AARCH64)
  # -L: where the arm64 dynamic loader and libraries live (Debian multiarch puts them under /).
  set(CMAKE_CROSSCOMPILING_EMULATOR "${MT_QEMU_AARCH64};-L;/")
endif()
