# Finds Arrow C++ and Parquet inside the `pyarrow` wheel (its bundled headers and shared libraries).
#
# Asks `python3` for pyarrow.get_include() and pyarrow.get_library_dirs(), then makes the imported
# targets ArrowFromPyarrow::arrow and ArrowFromPyarrow::parquet. The wheel ships only versioned
# files (libarrow.so.2600), so the targets point at those; the library directory is the RUNPATH
# of whatever links them, so tests run without LD_LIBRARY_PATH.
#
# Sets ArrowFromPyarrow_FOUND, ArrowFromPyarrow_VERSION, ArrowFromPyarrow_INCLUDE_DIR,
# ArrowFromPyarrow_LIBRARY_DIR.

include(PythonQuery)
spillway_python_lines(_afp_lines
  "import pyarrow; print(pyarrow.get_include()); print(pyarrow.get_library_dirs()[0]); print(pyarrow.__version__)")
if(_afp_lines)
  list(GET _afp_lines 0 ArrowFromPyarrow_INCLUDE_DIR)
  list(GET _afp_lines 1 ArrowFromPyarrow_LIBRARY_DIR)
  list(GET _afp_lines 2 ArrowFromPyarrow_VERSION)
endif()

# libarrow.so.2600 for pyarrow 26.x: the SONAME version is major * 100 + minor.
function(_afp_find_library out name)
  set(${out} "${out}-NOTFOUND" PARENT_SCOPE)
  if(NOT ArrowFromPyarrow_LIBRARY_DIR)
    return()
  endif()
  file(GLOB _candidates "${ArrowFromPyarrow_LIBRARY_DIR}/lib${name}.so"
                        "${ArrowFromPyarrow_LIBRARY_DIR}/lib${name}.so.[0-9]*")
  list(SORT _candidates)
  foreach(_candidate IN LISTS _candidates)
    # Prefer the shortest name (libarrow.so, then libarrow.so.2600 over libarrow.so.2600.1.0).
    string(LENGTH "${_candidate}" _len)
    if(NOT DEFINED _best_len OR _len LESS _best_len)
      set(_best "${_candidate}")
      set(_best_len ${_len})
    endif()
  endforeach()
  if(_best)
    set(${out} "${_best}" PARENT_SCOPE)
  endif()
endfunction()

_afp_find_library(ArrowFromPyarrow_ARROW_LIBRARY arrow)
_afp_find_library(ArrowFromPyarrow_PARQUET_LIBRARY parquet)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ArrowFromPyarrow
  REQUIRED_VARS ArrowFromPyarrow_ARROW_LIBRARY ArrowFromPyarrow_PARQUET_LIBRARY
                ArrowFromPyarrow_INCLUDE_DIR
  VERSION_VAR ArrowFromPyarrow_VERSION)

if(ArrowFromPyarrow_FOUND AND NOT TARGET ArrowFromPyarrow::arrow)
  foreach(_name arrow parquet)
    string(TOUPPER ${_name} _upper)
    set(_path "${ArrowFromPyarrow_${_upper}_LIBRARY}")
    get_filename_component(_soname "${_path}" NAME)
    add_library(ArrowFromPyarrow::${_name} SHARED IMPORTED)
    set_target_properties(ArrowFromPyarrow::${_name} PROPERTIES
      IMPORTED_LOCATION "${_path}"
      IMPORTED_SONAME "${_soname}"
      # SYSTEM: Arrow's headers are not held to our -Werror warning set.
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${ArrowFromPyarrow_INCLUDE_DIR}"
      INTERFACE_INCLUDE_DIRECTORIES "${ArrowFromPyarrow_INCLUDE_DIR}"
      # Binaries find the wheel's libraries at run time without LD_LIBRARY_PATH.
      INTERFACE_LINK_OPTIONS "LINKER:-rpath,${ArrowFromPyarrow_LIBRARY_DIR}")
  endforeach()
  set_property(TARGET ArrowFromPyarrow::parquet APPEND PROPERTY
    INTERFACE_LINK_LIBRARIES ArrowFromPyarrow::arrow)
endif()
mark_as_advanced(ArrowFromPyarrow_INCLUDE_DIR ArrowFromPyarrow_LIBRARY_DIR
                 ArrowFromPyarrow_ARROW_LIBRARY ArrowFromPyarrow_PARQUET_LIBRARY)
