# The driver of install.FindPackageConsumer (tests/install/CMakeLists.txt passes the -D values):
#   1. cmake --install BUILD_DIR --prefix WORK_DIR/staged/spillway
#   2. every expected file is there; no file of the CMake or pkg-config package names the staging
#      prefix, the source tree or the build tree
#   3. the prefix moves to WORK_DIR/moved/one/level/deeper/spillway, the staged copy is gone
#   4. the installed tool runs from the moved prefix
#   5. tests/install/consumer configures with CMAKE_PREFIX_PATH at the moved prefix only, builds
#      and runs: it sorts under a small device budget and checks the output (consumer/main.cpp)
#   6. the same main.cpp compiles and links with `pkg-config --static --cflags --libs spillway`
#      alone, and runs
# Any failure is a FATAL_ERROR: a non-zero exit for CTest.
cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR SOURCE_DIR WORK_DIR CONSUMER_DIR GENERATOR CXX_COMPILER LAYERS LIBDIR
            INCLUDEDIR BINDIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "find_package_consumer.cmake: -D${var}= is missing")
  endif()
endforeach()
string(REPLACE "," ";" LAYERS "${LAYERS}")

# Runs a command; on failure stops the test with its output.
function(run_step what)
  execute_process(COMMAND ${ARGN}
                  RESULT_VARIABLE result
                  OUTPUT_VARIABLE output
                  ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${ARGN}\n${output}")
  endif()
  message(STATUS "${what}: ok")
  set(step_output "${output}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(staged "${WORK_DIR}/staged/spillway")
set(moved "${WORK_DIR}/moved/one/level/deeper/spillway")

# 1. Install.
set(config_args "")
if(BUILD_TYPE)
  set(config_args --config "${BUILD_TYPE}")
endif()
run_step("cmake --install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${staged}"
         ${config_args})

# 2. What must be there, and what must not be named in it.
set(expected
    "${INCLUDEDIR}/spillway/ooc/external_sort.hpp"
    "${INCLUDEDIR}/spillway/runtime/device_environment.hpp"
    "${LIBDIR}/cmake/spillway/spillway-config.cmake"
    "${LIBDIR}/cmake/spillway/spillway-config-version.cmake"
    "${LIBDIR}/cmake/spillway/spillway-targets.cmake"
    "${LIBDIR}/pkgconfig/spillway.pc"
    "${BINDIR}/spillway")
foreach(layer IN LISTS LAYERS)
  list(APPEND expected "${LIBDIR}/libspillway_${layer}.a")
endforeach()
foreach(file IN LISTS expected)
  if(NOT EXISTS "${staged}/${file}")
    message(FATAL_ERROR "the install has no ${file}")
  endif()
endforeach()
file(GLOB_RECURSE package_files "${staged}/${LIBDIR}/cmake/*" "${staged}/${LIBDIR}/pkgconfig/*")
foreach(file IN LISTS package_files)
  file(READ "${file}" text)
  foreach(path IN ITEMS "${staged}" "${SOURCE_DIR}" "${BUILD_DIR}")
    string(FIND "${text}" "${path}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${file} names ${path}: the installed package is not relocatable")
    endif()
  endforeach()
endforeach()
message(STATUS "installed files: ok (none names ${staged}, ${SOURCE_DIR} or ${BUILD_DIR})")

# 3. Move the prefix.
get_filename_component(moved_parent "${moved}" DIRECTORY)
file(MAKE_DIRECTORY "${moved_parent}")
file(RENAME "${staged}" "${moved}")
file(REMOVE_RECURSE "${WORK_DIR}/staged")

# 4. The tool.
run_step("the installed tool" "${moved}/${BINDIR}/spillway" --help)

# 5. The CMake consumer.
set(consumer_build "${WORK_DIR}/consumer-build")
set(spill_dir "${WORK_DIR}/spill")
file(MAKE_DIRECTORY "${spill_dir}")
set(configure_args -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
                   "-DCMAKE_PREFIX_PATH=${moved}" "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF")
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(BUILD_TYPE)
  list(APPEND configure_args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
endif()
if(CONSUMER_FLAGS)
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=${CONSUMER_FLAGS}"
       "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_FLAGS}")
endif()
run_step("consumer configure" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${consumer_build}"
         ${configure_args})
file(STRINGS "${consumer_build}/CMakeCache.txt" found_dir REGEX "^spillway_DIR:")
if(NOT found_dir STREQUAL "spillway_DIR:PATH=${moved}/${LIBDIR}/cmake/spillway")
  message(FATAL_ERROR "the consumer found another spillway: ${found_dir}")
endif()
run_step("consumer build" "${CMAKE_COMMAND}" --build "${consumer_build}" ${config_args})
run_step("consumer run" "${consumer_build}/spillway_consumer" "${spill_dir}")
message(STATUS "${step_output}")

# 6. The pkg-config consumer.
find_program(PKG_CONFIG NAMES pkg-config pkgconf)
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "no pkg-config to check spillway.pc with")
endif()
set(ENV{PKG_CONFIG_PATH} "${moved}/${LIBDIR}/pkgconfig")
run_step("pkg-config" "${PKG_CONFIG}" --static --cflags --libs spillway)
string(STRIP "${step_output}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
separate_arguments(consumer_flags UNIX_COMMAND "${CONSUMER_FLAGS}")
run_step("pkg-config consumer build" "${CXX_COMPILER}" -std=c++20 -O1 ${consumer_flags}
         "${CONSUMER_DIR}/main.cpp" -o "${WORK_DIR}/spillway_consumer_pc" ${pc_flags})
run_step("pkg-config consumer run" "${WORK_DIR}/spillway_consumer_pc" "${spill_dir}")
