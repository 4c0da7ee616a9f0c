# Writes OUT, a header with the commit the binary is built from, at every
# build (not at configure time, which would keep a stale commit): HEAD's short
# hash, "-dirty" when tracked files differ from it, "unknown" without git.
# OUT is rewritten only when its text changes, so an unchanged commit
# recompiles nothing.
execute_process(COMMAND git -C "${SRC}" rev-parse --short HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT changes STREQUAL "")
    set(commit "${commit}-dirty")
  endif()
endif()
set(text "#pragma once\n\nnamespace hyllm {\ninline constexpr const char* kBuildCommit = \"${commit}\";\n}  // namespace hyllm\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
