# What 'cmake --install build --prefix P' (and 'make install') puts under P.
# The layout is the one src/base/paths.h looks for, so any prefix works:
#   bin/heaptrail
#   lib/heaptrail/libheaptrail.so, lib/heaptrail/libheaptrail-ifeo.so
#   lib/libheaptrail-api.so.N (+ the .so link), lib/pkgconfig/heaptrail.pc
#   include/heaptrail/{trace,control,heap}.h
#   share/heaptrail/report.html, share/man/man1/heaptrail*.1
#   share/bash-completion/completions/heaptrail, share/zsh/site-functions/_heaptrail
install(TARGETS heaptrail RUNTIME DESTINATION bin)
install(TARGETS heaptrail_preload heaptrail_ifeo LIBRARY DESTINATION lib/heaptrail)
install(TARGETS heaptrail_api LIBRARY DESTINATION lib NAMELINK_COMPONENT Unspecified)
install(FILES ${CMAKE_BINARY_DIR}/src/api/heaptrail.pc DESTINATION lib/pkgconfig)
install(FILES include/heaptrail/trace.h include/heaptrail/control.h include/heaptrail/heap.h
  DESTINATION include/heaptrail)
# Without node and npm the page is not built; 'heaptrail report' says so.
install(FILES ${CMAKE_BINARY_DIR}/share/heaptrail/report.html DESTINATION share/heaptrail
  OPTIONAL)
install(DIRECTORY ${CMAKE_BINARY_DIR}/share/man/ DESTINATION share/man)
install(FILES scripts/completion/heaptrail.bash DESTINATION share/bash-completion/completions
  RENAME heaptrail)
install(FILES scripts/completion/_heaptrail DESTINATION share/zsh/site-functions)
