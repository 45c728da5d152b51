# Use ccache when it is installed: rebuilds after a branch switch or a preset change are cheap.
# Paths are hashed relative to the checkout (base_dir), and the build directory is not hashed
# into objects with debug information (hash_dir off), so a second clone of the repository (CI's
# clean clone, a worktree) reuses what another clone compiled. Its cost: an object taken from the
# cache names the build directory of the clone that compiled it in its debug information.
find_program(SPILLWAY_CCACHE ccache)
if(SPILLWAY_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}
                                  CCACHE_NOHASHDIR=1 ${SPILLWAY_CCACHE})
endif()
