# Writes the source tree's commit (with -dirty for uncommitted changes) into OUT at every
# build, touching OUT only when it changes, so the fingerprint names the code actually built.
# A tree copied without its own repository (to a GPU node, say) has no commit to read, or a
# stale one: the environment variable RIDGELINE_GIT_SHA then names it.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT "$ENV{RIDGELINE_GIT_SHA}" STREQUAL "")
  set(sha "$ENV{RIDGELINE_GIT_SHA}")
elseif(NOT rc EQUAL 0 OR sha STREQUAL "")
  set(sha "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(dirty)
    set(sha "${sha}-dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/git_sha.cmake.\n#pragma once\n\nnamespace ridgeline::build {\ninline constexpr const char* git_sha = \"${sha}\";\n}  // namespace ridgeline::build\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
