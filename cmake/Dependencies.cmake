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

# The CUDA backend: AUTO builds it when a CUDA toolkit is found (the runtime is linked
# statically, so binaries run on a GPU machine that has only the driver).
set(SPILLWAY_ENABLE_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE SPILLWAY_ENABLE_CUDA PROPERTY STRINGS AUTO ON OFF)
set(SPILLWAY_HAS_CUDA OFF)
if(NOT SPILLWAY_ENABLE_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(SPILLWAY_HAS_CUDA ON)
    message(STATUS "spillway: CUDA backend enabled (CUDA ${CUDAToolkit_VERSION})")
  elseif(SPILLWAY_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SPILLWAY_ENABLE_CUDA=ON but no CUDA toolkit was found")
  else()
    message(STATUS "spillway: no CUDA toolkit found; building without the CUDA backend")
  endif()
endif()
