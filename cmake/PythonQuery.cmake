# spillway_python_lines(OUT CODE): runs CODE with python3 and sets OUT to the list of the lines it
# printed, or to "" when there is no python3 or CODE fails (an import error, say). The find
# modules that locate libraries inside PyPI wheels (FindArrowFromPyarrow, FindRmmFromWheel) ask
# python3 where the packages are this way.
include_guard(GLOBAL)

function(spillway_python_lines out code)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(python "${Python3_EXECUTABLE}")
  if(NOT python)
    find_program(_spillway_python3 NAMES python3)
    set(python "${_spillway_python3}")
  endif()
  set(${out} "" PARENT_SCOPE)
  if(NOT python)
    return()
  endif()
  execute_process(
    COMMAND "${python}" -c "${code}"
    OUTPUT_VARIABLE printed
    ERROR_QUIET
    RESULT_VARIABLE result
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(result EQUAL 0)
    string(REPLACE "\n" ";" lines "${printed}")
    set(${out} "${lines}" PARENT_SCOPE)
  endif()
endfunction()
