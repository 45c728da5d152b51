# What `cmake --install <build> [--prefix <dir>]` puts under the prefix, for programs that use
# spillway as a library:
#   include/spillway/...                  the public headers
#   lib/libspillway_<layer>.a             every layer's library
#   bin/spillway                          the command-line tool
#   lib/cmake/spillway/                   the CMake package: find_package(spillway) gives
#                                         spillway::spillway (every layer) and spillway::<layer>
#   lib/pkgconfig/spillway.pc             the same for pkg-config (static: --static)
# Every installed file names the prefix relative to itself, so the prefix may move.
include(CMakePackageConfigHelpers)

set(SPILLWAY_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/spillway)
get_property(_spillway_layers GLOBAL PROPERTY SPILLWAY_LAYERS)

# spillway_layer_link_order(OUT): the layers in the order a static link needs them, each before
# the layers it links (read from the targets, so a new layer takes its place by itself).
function(spillway_layer_link_order out)
  get_property(layers GLOBAL PROPERTY SPILLWAY_LAYERS)
  foreach(layer IN LISTS layers)
    get_target_property(links spillway_${layer} LINK_LIBRARIES)
    set(deps_${layer} "")
    foreach(link IN LISTS links)
      if(link MATCHES "^spillway::(.+)$" AND CMAKE_MATCH_1 IN_LIST layers)
        list(APPEND deps_${layer} ${CMAKE_MATCH_1})
      endif()
    endforeach()
  endforeach()
  set(order "")
  set(remaining ${layers})
  while(remaining)
    set(ready "")
    foreach(layer IN LISTS remaining)
      set(needed OFF)
      foreach(other IN LISTS remaining)
        if(layer IN_LIST deps_${other})
          set(needed ON)
          break()
        endif()
      endforeach()
      if(NOT needed)
        list(APPEND ready ${layer})
      endif()
    endforeach()
    if(NOT ready)
      message(FATAL_ERROR "spillway: the layers ${remaining} link each other in a cycle")
    endif()
    list(APPEND order ${ready})
    list(REMOVE_ITEM remaining ${ready})
  endwhile()
  set(${out} ${order} PARENT_SCOPE)
endfunction()

# Headers, libraries and the tool.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/spillway
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
set(_spillway_layer_targets ${_spillway_layers})
list(TRANSFORM _spillway_layer_targets PREPEND spillway_)
set_target_properties(spillway_all PROPERTIES EXPORT_NAME spillway)
install(TARGETS ${_spillway_layer_targets} spillway_all
        EXPORT spillway-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The installed tool keeps the RUNPATH of the libraries it links outside this project (Arrow's in
# the pyarrow wheel): the build tree's RUNPATH is dropped on install.
if(TARGET spillway)  # SPILLWAY_BUILD_APPS
  set_target_properties(spillway PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS spillway RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# The CMake package.
install(EXPORT spillway-targets
        NAMESPACE spillway::
        DESTINATION ${SPILLWAY_INSTALL_CMAKEDIR})
# RMM interop (header-only over librmm) in a file of its own: the package loads it when the
# librmm wheel is there, and works without it.
if(TARGET spillway_rmm_interop)
  set_target_properties(spillway_rmm_interop PROPERTIES EXPORT_NAME rmm_interop)
  install(TARGETS spillway_rmm_interop EXPORT spillway-rmm-targets)
  install(EXPORT spillway-rmm-targets
          NAMESPACE spillway::
          DESTINATION ${SPILLWAY_INSTALL_CMAKEDIR})
endif()

# How the build found Arrow: from the pyarrow wheel (our find module), or a system Arrow.
set(SPILLWAY_ARROW_FROM_PYARROW OFF)
if("ArrowFromPyarrow::arrow" IN_LIST SPILLWAY_ARROW_TARGETS)
  set(SPILLWAY_ARROW_FROM_PYARROW ON)
endif()
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/spillway-config.cmake.in
  ${PROJECT_BINARY_DIR}/spillway-config.cmake
  INSTALL_DESTINATION ${SPILLWAY_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/spillway-config-version.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
# The find modules of the libraries inside Python wheels, which the package finds as the build did.
install(FILES ${PROJECT_BINARY_DIR}/spillway-config.cmake
              ${PROJECT_BINARY_DIR}/spillway-config-version.cmake
              ${PROJECT_SOURCE_DIR}/cmake/PythonQuery.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindArrowFromPyarrow.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindRmmFromWheel.cmake
        DESTINATION ${SPILLWAY_INSTALL_CMAKEDIR})

# The pkg-config file: the layers in link order; what they link privately (they are static) in
# Requires.private and Libs.private.
spillway_layer_link_order(_spillway_link_order)
set(SPILLWAY_PC_LIBS "")
foreach(layer IN LISTS _spillway_link_order)
  string(APPEND SPILLWAY_PC_LIBS " -lspillway_${layer}")
endforeach()
set(SPILLWAY_PC_CFLAGS "")
set(SPILLWAY_PC_REQUIRES_PRIVATE "libzstd liblz4 libxxhash spdlog fmt")
set(SPILLWAY_PC_LIBS_PRIVATE "")
if(SPILLWAY_HAS_ARROW)
  if(SPILLWAY_ARROW_FROM_PYARROW)
    # The wheel has no .pc file and only versioned libraries: their paths, and their RUNPATH.
    string(APPEND SPILLWAY_PC_LIBS_PRIVATE
           " ${ArrowFromPyarrow_PARQUET_LIBRARY} ${ArrowFromPyarrow_ARROW_LIBRARY}"
           " -Wl,-rpath,${ArrowFromPyarrow_LIBRARY_DIR}")
  else()
    string(APPEND SPILLWAY_PC_REQUIRES_PRIVATE " parquet arrow")
  endif()
endif()
if(SPILLWAY_HAS_MPI)
  foreach(_mpi_item IN LISTS MPI_CXX_LINK_FLAGS MPI_CXX_LIBRARIES)
    string(APPEND SPILLWAY_PC_LIBS_PRIVATE " ${_mpi_item}")
  endforeach()
endif()
if(SPILLWAY_HAS_CUDA)
  string(APPEND SPILLWAY_PC_CFLAGS " -DSPILLWAY_HAS_CUDA=1")
  string(APPEND SPILLWAY_PC_LIBS_PRIVATE
         " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt")
endif()
string(APPEND SPILLWAY_PC_LIBS_PRIVATE " -pthread")
string(STRIP "${SPILLWAY_PC_LIBS_PRIVATE}" SPILLWAY_PC_LIBS_PRIVATE)
# ${pcfiledir} is where pkg-config found the file: the prefix relative to it.
file(RELATIVE_PATH SPILLWAY_PC_PREFIX_FROM_PCDIR "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig"
     "/prefix")
string(REGEX REPLACE "/$" "" SPILLWAY_PC_PREFIX_FROM_PCDIR "${SPILLWAY_PC_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/spillway.pc.in ${PROJECT_BINARY_DIR}/spillway.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/spillway.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
