# spillway_add_library(NAME layer SOURCES ... HEADERS ... DEPENDS ...)
#   One static library per layer, exported as spillway::<layer> (in this build an alias, once
#   installed an imported target: cmake/SpillwayInstall.cmake installs every layer).
# spillway_add_test(NAME name SOURCES ... DEPENDS ... LABELS ...)
#   One GoogleTest executable, registered with CTest test by test.

set(SPILLWAY_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wsign-conversion -Wshadow
                           -Wnon-virtual-dtor -Wold-style-cast)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 reports -Wrestrict and -Wstringop-overflow on std::string concatenation at -O3 (GCC
  # bugs 105329, 105651): false positives in the standard library, not in our code.
  list(APPEND SPILLWAY_WARNING_FLAGS -Wno-restrict -Wno-stringop-overflow)
endif()
if(SPILLWAY_WARNINGS_AS_ERRORS)
  list(APPEND SPILLWAY_WARNING_FLAGS -Werror)
endif()

function(spillway_add_library)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;HEADERS;DEPENDS" ${ARGN})
  add_library(spillway_${ARG_NAME} STATIC ${ARG_SOURCES} ${ARG_HEADERS})
  add_library(spillway::${ARG_NAME} ALIAS spillway_${ARG_NAME})
  target_include_directories(spillway_${ARG_NAME} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  # The public headers are C++20: a program that links an installed layer compiles as C++20 too.
  target_compile_features(spillway_${ARG_NAME} PUBLIC cxx_std_20)
  set_target_properties(spillway_${ARG_NAME} PROPERTIES EXPORT_NAME ${ARG_NAME})
  set_property(GLOBAL APPEND PROPERTY SPILLWAY_LAYERS ${ARG_NAME})
  target_compile_options(spillway_${ARG_NAME} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${SPILLWAY_WARNING_FLAGS}>)
  target_link_libraries(spillway_${ARG_NAME} PUBLIC ${ARG_DEPENDS})
  if(SPILLWAY_HAS_CUDA)
    # Public: private headers with inline code (tests include some) must read the same everywhere.
    target_compile_definitions(spillway_${ARG_NAME} PUBLIC SPILLWAY_HAS_CUDA=1)
  endif()
endfunction()

# spillway_add_cuda_sources(TARGET spillway_<layer> SOURCES a.cu ...)
#   The CUDA kernels of a layer, compiled by nvcc into the layer's library, with the CUDA
#   runtime linked statically (a GPU machine needs only the driver).
function(spillway_add_cuda_sources)
  cmake_parse_arguments(ARG "" "TARGET" "SOURCES" ${ARGN})
  target_sources(${ARG_TARGET} PRIVATE ${ARG_SOURCES})
  target_compile_options(${ARG_TARGET} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra>)
  target_link_libraries(${ARG_TARGET} PUBLIC CUDA::cudart_static)
endfunction()

function(spillway_add_test)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPENDS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_compile_options(${ARG_NAME} PRIVATE ${SPILLWAY_WARNING_FLAGS})
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPENDS} GTest::gtest GTest::gmock)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  gtest_discover_tests(${ARG_NAME}
    PROPERTIES LABELS "${ARG_LABELS}"
    DISCOVERY_TIMEOUT 60)
endfunction()
