# Finds RMM (the RAPIDS memory manager) inside the `librmm-cu<N>` wheel from PyPI: its headers,
# the CCCL headers it bundles (include/rapids), librmm.so and the `rapids-logger` wheel it needs.
#
# Asks `python3` where the `librmm` and `rapids_logger` packages are, then makes the imported
# target RmmFromWheel::rmm (librmm.so with every include directory and rapids-logger's library;
# the CUDA toolkit's headers come from CUDA::toolkit). The library directories become the RUNPATH
# of whatever links it, so tests run without LD_LIBRARY_PATH. librmm.so links the CUDA runtime
# statically: it needs only the driver.
#
# Sets RmmFromWheel_FOUND, RmmFromWheel_VERSION.

include(PythonQuery)
spillway_python_lines(_rfw_lines
  "import os, librmm, rapids_logger; r = os.path.dirname(librmm.__file__); l = os.path.dirname(rapids_logger.__file__); print(r); print(l); print(open(os.path.join(r, 'VERSION')).read().strip())")
if(_rfw_lines)
  list(GET _rfw_lines 0 _rfw_rmm_root)
  list(GET _rfw_lines 1 _rfw_logger_root)
  list(GET _rfw_lines 2 RmmFromWheel_VERSION)
endif()

if(_rfw_rmm_root)
  find_library(_rfw_rmm_library NAMES rmm PATHS "${_rfw_rmm_root}/lib64" NO_DEFAULT_PATH)
  find_library(_rfw_logger_library NAMES rapids_logger PATHS "${_rfw_logger_root}/lib64"
               NO_DEFAULT_PATH)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(RmmFromWheel
  REQUIRED_VARS _rfw_rmm_library _rfw_logger_library RmmFromWheel_VERSION
  VERSION_VAR RmmFromWheel_VERSION)

if(RmmFromWheel_FOUND AND NOT TARGET RmmFromWheel::rmm)
  add_library(RmmFromWheel::rapids_logger SHARED IMPORTED)
  set_target_properties(RmmFromWheel::rapids_logger PROPERTIES
    IMPORTED_LOCATION "${_rfw_logger_library}"
    INTERFACE_INCLUDE_DIRECTORIES "${_rfw_logger_root}/include")
  add_library(RmmFromWheel::rmm SHARED IMPORTED)
  set_target_properties(RmmFromWheel::rmm PROPERTIES
    IMPORTED_LOCATION "${_rfw_rmm_library}"
    INTERFACE_INCLUDE_DIRECTORIES "${_rfw_rmm_root}/include;${_rfw_rmm_root}/include/rapids"
    INTERFACE_LINK_LIBRARIES "RmmFromWheel::rapids_logger;CUDA::toolkit")
endif()
