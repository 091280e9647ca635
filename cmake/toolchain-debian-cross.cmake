# Cross build for one of Debian's ARM architectures, on Debian's cross
# compilers, against that architecture's Debian packages unpacked into a
# sysroot (tools/dev cross arm64|armhf makes both and passes them here):
#
#   cmake -S . -B build/cross-arm64 --toolchain cmake/toolchain-debian-cross.cmake \
#         -DWALBUS_CROSS_ARCH=arm64 -DWALBUS_CROSS_SYSROOT=/abs/path/sysroot
#
# The unpacked packages stay out of the build machine's package database:
# several of them (RocksDB's among them) cannot be installed beside the
# build machine's own. C and C++'s own libraries come with the compiler.
# Programs run on the build machine (flatc) or under qemu-user
# (CMAKE_CROSSCOMPILING_EMULATOR: the tests, the walbus tool at build time).

set(WALBUS_CROSS_ARCH "" CACHE STRING "Debian architecture to build for: arm64 or armhf")
set(WALBUS_CROSS_SYSROOT "" CACHE PATH "The architecture's packages unpacked (dpkg-deb -x) into one folder")
# try_compile reads this file again in its own project; hand it the two.
set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES WALBUS_CROSS_ARCH WALBUS_CROSS_SYSROOT)

if(WALBUS_CROSS_ARCH STREQUAL "arm64")
  set(triplet aarch64-linux-gnu)
  set(CMAKE_SYSTEM_PROCESSOR aarch64)
  set(qemu qemu-aarch64-static)
elseif(WALBUS_CROSS_ARCH STREQUAL "armhf")
  set(triplet arm-linux-gnueabihf)
  set(CMAKE_SYSTEM_PROCESSOR arm)
  set(qemu qemu-arm-static)
  # GCC notes (not warns) on every std::vector<Op> growth that GCC 7.1
  # changed how such a type is passed; all of walbus is built by one compiler.
  set(CMAKE_CXX_FLAGS_INIT "-Wno-psabi")
else()
  message(FATAL_ERROR "WALBUS_CROSS_ARCH must be arm64 or armhf, not '${WALBUS_CROSS_ARCH}'")
endif()
if(NOT IS_DIRECTORY "${WALBUS_CROSS_SYSROOT}/usr/lib/${triplet}")
  message(FATAL_ERROR "WALBUS_CROSS_SYSROOT (${WALBUS_CROSS_SYSROOT}) holds no ${triplet} libraries")
endif()

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${triplet}-gcc)
set(CMAKE_CXX_COMPILER ${triplet}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${triplet})

set(CMAKE_FIND_ROOT_PATH ${WALBUS_CROSS_SYSROOT} /usr/${triplet})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} "${WALBUS_CROSS_SYSROOT}/usr/lib/${triplet}/pkgconfig:${WALBUS_CROSS_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${WALBUS_CROSS_SYSROOT}")

# Multiarch headers (OpenSSL's configuration) live beside the others.
set(CMAKE_C_STANDARD_INCLUDE_DIRECTORIES ${WALBUS_CROSS_SYSROOT}/usr/include/${triplet})
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES ${WALBUS_CROSS_SYSROOT}/usr/include/${triplet})

# The libraries' own dependencies (RocksDB's compressors) are found through
# the sysroot at link time and at run time.
set(libdirs "${WALBUS_CROSS_SYSROOT}/usr/lib/${triplet}:${WALBUS_CROSS_SYSROOT}/lib/${triplet}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${libdirs}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${libdirs}")
set(CMAKE_CROSSCOMPILING_EMULATOR ${qemu} -L /usr/${triplet} -E LD_LIBRARY_PATH=${libdirs})

# flatc runs on the build machine.
find_program(WALBUS_FLATC flatc REQUIRED)
