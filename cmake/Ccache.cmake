# Use ccache when it is installed: rebuilds after a branch switch or a preset change are cheap.
find_program(SPILLWAY_CCACHE ccache)
if(SPILLWAY_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${SPILLWAY_CCACHE})
endif()
