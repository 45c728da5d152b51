# SPILLWAY_SANITIZE="address;undefined" or "thread": applied to every target, ours and tests.
if(SPILLWAY_SANITIZE)
  string(REPLACE ";" "," _spillway_sanitizers "${SPILLWAY_SANITIZE}")
  add_compile_options(-fsanitize=${_spillway_sanitizers} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_spillway_sanitizers})
endif()
