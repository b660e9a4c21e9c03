# The tests' private session directories (tests/CMakeLists.txt), run by
# ctest as the fixture tests.runtime: -DMODE=setup makes BASE/TEST for each
# of TESTS (mode 0700, as a real XDG_RUNTIME_DIR);
# -DMODE=cleanup removes BASE and fails when a test left a session's file
# in it (or one under its HEAPTRAIL_ROOT).
if(MODE STREQUAL "setup")
  file(REMOVE_RECURSE ${BASE})
  file(MAKE_DIRECTORY ${BASE})
  set(dirs)
  foreach(t ${TESTS})
    list(APPEND dirs ${BASE}/${t})
  endforeach()
  file(MAKE_DIRECTORY ${dirs})
  execute_process(COMMAND chmod 700 ${dirs} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "chmod 700 of the tests' session directories: ${rc}")
  endif()
elseif(MODE STREQUAL "cleanup")
  # Sessions' files only (a browser's dconf/ may be there too).
  file(GLOB_RECURSE left LIST_DIRECTORIES false ${BASE}/*/heaptrail/* ${BASE}/*/root/*)
  file(REMOVE_RECURSE ${BASE})
  if(left)
    list(JOIN left "\n  " text)
    message(FATAL_ERROR "tests left these files in their session directories:\n  ${text}")
  endif()
else()
  message(FATAL_ERROR "MODE is setup or cleanup")
endif()
