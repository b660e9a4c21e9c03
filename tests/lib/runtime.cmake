# The tests' private session directories (tests/CMakeLists.txt), run by
# ctest as the fixture tests.runtime. This ctest run's are RUN = the
# environment's HT_TEST_RUN, BASE/run-PID (tests/test-env.cmake, PID the
# ctest process's): another ctest run in the same build tree has its own.
# -DMODE=setup makes RUN/TEST for each of TESTS (mode 0700, as a real
# XDG_RUNTIME_DIR) and removes what else is in BASE but the directories of
# ctest runs still running (a ctest killed before its cleanup leaves its own);
# -DMODE=cleanup stops what still holds a file in RUN open (a test killed
# by its timeout leaves its detached `heaptrail start` daemon running:
# stop_leftovers.sh), removes RUN (and BASE when it is then empty), and fails
# when a test left a process running or a session's file in it (or one under
# its HEAPTRAIL_ROOT).
set(RUN $ENV{HT_TEST_RUN})
string(FIND "${RUN}" "${BASE}/run-" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "HT_TEST_RUN is '${RUN}', not under ${BASE}: run the tests with ctest "
                      "(tests/test-env.cmake sets it)")
endif()
if(MODE STREQUAL "setup")
  file(GLOB others LIST_DIRECTORIES true ${BASE}/*)
  foreach(o ${others})
    get_filename_component(name ${o} NAME)
    if(name MATCHES "^run-([0-9]+)$" AND EXISTS /proc/${CMAKE_MATCH_1})
      continue()
    endif()
    file(REMOVE_RECURSE ${o})
  endforeach()
  file(REMOVE_RECURSE ${RUN})
  file(MAKE_DIRECTORY ${RUN})
  set(dirs)
  foreach(t ${TESTS})
    list(APPEND dirs ${RUN}/${t})
  endforeach()
  file(MAKE_DIRECTORY ${dirs})
  execute_process(COMMAND chmod 700 ${dirs} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "chmod 700 of the tests' session directories: ${rc}")
  endif()
elseif(MODE STREQUAL "cleanup")
  execute_process(COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/stop_leftovers.sh ${RUN}
                  OUTPUT_VARIABLE stopped OUTPUT_STRIP_TRAILING_WHITESPACE)
  # Sessions' files only (a browser's dconf/ may be there too).
  file(GLOB_RECURSE left LIST_DIRECTORIES false ${RUN}/*/heaptrail/* ${RUN}/*/root/*)
  file(REMOVE_RECURSE ${RUN})
  file(GLOB others LIST_DIRECTORIES true ${BASE}/*)
  if(NOT others)
    file(REMOVE_RECURSE ${BASE})
  endif()
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
