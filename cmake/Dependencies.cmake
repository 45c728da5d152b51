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

# Logging: spdlog over fmt, as shared libraries.
set(SPILLWAY_LOG_TARGETS spdlog::spdlog fmt::fmt)

# SPILLWAY_PORTABLE: binaries that run on a machine with nothing of ours installed (a GPU machine
# with only the driver): libstdc++ and libgcc linked statically, zstd, lz4 and xxhash from their
# static archives, spdlog and fmt header-only, the CUDA runtime static. They then need only glibc
# and, for the CUDA backend, the driver's libcuda (which the runtime opens itself).
option(SPILLWAY_PORTABLE "Link everything but glibc statically" OFF)
if(SPILLWAY_PORTABLE)
  add_link_options(-static-libstdc++ -static-libgcc)
  foreach(_lib ZSTD LZ4 XXHASH)
    string(TOLOWER ${_lib} _name)
    find_library(SPILLWAY_${_lib}_STATIC NAMES lib${_name}.a REQUIRED)
    set_property(TARGET PkgConfig::${_lib} PROPERTY INTERFACE_LINK_LIBRARIES
                                                    ${SPILLWAY_${_lib}_STATIC})
  endforeach()
  set_property(TARGET spdlog::spdlog_header_only PROPERTY INTERFACE_LINK_LIBRARIES
                                                          Threads::Threads fmt::fmt-header-only)
  set(SPILLWAY_LOG_TARGETS spdlog::spdlog_header_only fmt::fmt-header-only)
  message(STATUS "spillway: portable binaries (static libstdc++, zstd, lz4, xxhash; "
                 "header-only spdlog and fmt)")
endif()

# The CUDA backend: AUTO builds it when a CUDA toolkit is found (the runtime is linked
# statically, so binaries run on a GPU machine that has only the driver).
set(SPILLWAY_ENABLE_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE SPILLWAY_ENABLE_CUDA PROPERTY STRINGS AUTO ON OFF)
# The kernels (src/*/cuda/*.cu) need nvcc as well. Sanitizer builds leave the backend out unless
# it is asked for: the CUDA runtime and AddressSanitizer's shadow memory do not mix.
set(SPILLWAY_HAS_CUDA OFF)
if(SPILLWAY_ENABLE_CUDA STREQUAL "AUTO" AND SPILLWAY_SANITIZE)
  message(STATUS "spillway: sanitizer build; building without the CUDA backend")
elseif(NOT SPILLWAY_ENABLE_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  include(CheckLanguage)
  check_language(CUDA)
  if(CUDAToolkit_FOUND AND CMAKE_CUDA_COMPILER)
    # The H100/H200 generation by default; set CMAKE_CUDA_ARCHITECTURES for others ("native" on a
    # GPU machine). One architecture keeps the build short.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc 13's flag for C++20; the sources are C++20 like the rest.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    set(SPILLWAY_HAS_CUDA ON)
    message(STATUS "spillway: CUDA backend enabled (CUDA ${CUDAToolkit_VERSION}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(SPILLWAY_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SPILLWAY_ENABLE_CUDA=ON but no CUDA toolkit with nvcc was found")
  else()
    message(STATUS "spillway: no CUDA toolkit with nvcc found; building without the CUDA backend")
  endif()
endif()

# Optional interop with RMM, the allocator of cuDF (include/spillway/memory/rmm_interop.hpp and
# its tests): the `librmm-cu<N>` wheel from PyPI, found by cmake/FindRmmFromWheel.cmake. It needs
# the CUDA backend (RMM's headers are CUDA headers); the portable build leaves it out, since
# librmm is a shared library.
set(SPILLWAY_ENABLE_RMM "AUTO" CACHE STRING "Build the RMM interop tests: AUTO, ON or OFF")
set_property(CACHE SPILLWAY_ENABLE_RMM PROPERTY STRINGS AUTO ON OFF)
set(SPILLWAY_HAS_RMM OFF)
if(SPILLWAY_HAS_CUDA AND NOT SPILLWAY_PORTABLE AND NOT SPILLWAY_ENABLE_RMM STREQUAL "OFF")
  find_package(RmmFromWheel QUIET)
  if(RmmFromWheel_FOUND)
    set(SPILLWAY_HAS_RMM ON)
    message(STATUS "spillway: RMM interop with librmm ${RmmFromWheel_VERSION} from PyPI")
  elseif(SPILLWAY_ENABLE_RMM STREQUAL "ON")
    message(FATAL_ERROR "SPILLWAY_ENABLE_RMM=ON but the librmm wheel was not found "
                        "(python3 -m pip install librmm-cu13)")
  endif()
elseif(SPILLWAY_ENABLE_RMM STREQUAL "ON")
  message(FATAL_ERROR "SPILLWAY_ENABLE_RMM=ON needs the CUDA backend and a non-portable build")
endif()

# Arrow C++ and Parquet for the io layer: a system Arrow (find_package(Arrow), e.g. from Apache's
# apt repository) when present, else the headers and libraries bundled in the `pyarrow` wheel
# (cmake/FindArrowFromPyarrow.cmake). AUTO builds the Arrow readers and writers when either is
# found; without Arrow, Parquet and Arrow IPC throw not_supported and CSV still works.
set(SPILLWAY_ENABLE_ARROW "AUTO" CACHE STRING "Build Parquet and Arrow IPC support: AUTO, ON or OFF")
set_property(CACHE SPILLWAY_ENABLE_ARROW PROPERTY STRINGS AUTO ON OFF)
set(SPILLWAY_HAS_ARROW OFF)
set(SPILLWAY_ARROW_TARGETS "")
if(NOT SPILLWAY_ENABLE_ARROW STREQUAL "OFF")
  find_package(Arrow CONFIG QUIET)
  find_package(Parquet CONFIG QUIET)
  if(Arrow_FOUND AND Parquet_FOUND)
    set(SPILLWAY_HAS_ARROW ON)
    if(TARGET Parquet::parquet_shared)
      set(SPILLWAY_ARROW_TARGETS Arrow::arrow_shared Parquet::parquet_shared)
    else()
      set(SPILLWAY_ARROW_TARGETS Arrow::arrow_static Parquet::parquet_static)
    endif()
    message(STATUS "spillway: Arrow ${Arrow_VERSION} (system) for Parquet and Arrow IPC")
  else()
    find_package(ArrowFromPyarrow QUIET)
    if(ArrowFromPyarrow_FOUND)
      set(SPILLWAY_HAS_ARROW ON)
      set(SPILLWAY_ARROW_TARGETS ArrowFromPyarrow::arrow ArrowFromPyarrow::parquet)
      message(STATUS "spillway: Arrow ${ArrowFromPyarrow_VERSION} from pyarrow "
                     "(${ArrowFromPyarrow_LIBRARY_DIR}) for Parquet and Arrow IPC")
    elseif(SPILLWAY_ENABLE_ARROW STREQUAL "ON")
      message(FATAL_ERROR "SPILLWAY_ENABLE_ARROW=ON but neither find_package(Arrow) nor pyarrow "
                          "found Arrow C++; run scripts/install-deps.sh")
    else()
      message(STATUS "spillway: no Arrow C++ found; Parquet and Arrow IPC throw not_supported")
    endif()
  endif()
endif()

# MPI for multi-process shuffles (Debian: libopenmpi-dev, openmpi-bin). AUTO builds the MPI
# communicator when find_package(MPI) finds a C++-capable MPI; without it, constructing one
# throws not_supported.
set(SPILLWAY_ENABLE_MPI "AUTO" CACHE STRING "Build the MPI communicator: AUTO, ON or OFF")
set_property(CACHE SPILLWAY_ENABLE_MPI PROPERTY STRINGS AUTO ON OFF)
set(SPILLWAY_HAS_MPI OFF)
if(NOT SPILLWAY_ENABLE_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(SPILLWAY_HAS_MPI ON)
    message(STATUS "spillway: MPI communicator enabled (MPI ${MPI_CXX_VERSION})")
  elseif(SPILLWAY_ENABLE_MPI STREQUAL "ON")
    message(FATAL_ERROR "SPILLWAY_ENABLE_MPI=ON but find_package(MPI COMPONENTS CXX) failed; "
                        "run scripts/install-deps.sh")
  else()
    message(STATUS "spillway: no MPI found; building without the MPI communicator")
  endif()
endif()
# How mpirun must run here, in one place: scripts/mpirun.env (VAR=value lines), read by the test
# registration (tests/shuffle) and by scripts/mpirun.sh.
file(STRINGS ${PROJECT_SOURCE_DIR}/scripts/mpirun.env SPILLWAY_MPIEXEC_ENVIRONMENT
     REGEX "^[A-Za-z_][A-Za-z0-9_]*=")
