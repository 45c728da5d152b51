# All dependencies are found, never downloaded at build time. `make deps` installs them.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
if(SPILLWAY_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(SPILLWAY_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# Compression and checksums of spilled data (Debian: libzstd-dev, liblz4-dev, libxxhash-dev).
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
