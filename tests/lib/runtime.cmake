# The tests' private session directories (tests/CMakeLists.txt), run by
# ctest as the fixture tests.runtime: -DMODE=setup makes BASE/TEST for each
# of TESTS (mode 0700, as a real XDG_RUNTIME_DIR);
# -DMODE=cleanup stops what still holds a file in BASE open (a test killed
# by its timeout leaves its detached `heaptrail start` daemon running:
# stop_leftovers.sh), removes BASE, and fails when a test left a process
# running or a session's file in it (or one under its HEAPTRAIL_ROOT).
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
  execute_process(COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/stop_leftovers.sh ${BASE}
                  OUTPUT_VARIABLE stopped OUTPUT_STRIP_TRAILING_WHITESPACE)
  # Sessions' files only (a browser's dconf/ may be there too).
  file(GLOB_RECURSE left LIST_DIRECTORIES false ${BASE}/*/heaptrail/* ${BASE}/*/root/*)
  file(REMOVE_RECURSE ${BASE})
  set(text)
  if(stopped)
    string(REPLACE "\n" "\n  " stopped "${stopped}")
    string(APPEND text "tests left these processes running (stopped now):\n  ${stopped}\n")
  endif()
  if(left)
    list(JOIN left "\n  " files)
    string(APPEND text "tests left these files in their session directories:\n  ${files}\n")
  endif()
  if(text)
    message(FATAL_ERROR "${text}")
  endif()
else()
  message(FATAL_ERROR "MODE is setup or cleanup")
endif()
