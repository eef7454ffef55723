# Small helpers shared by every folder's CMakeLists.txt.

include(GoogleTest)

# milesrt_add_gtest(<target> SOURCES <files...> LIBS <libs...> LABELS <labels...> [TIMEOUT s])
# Builds one GoogleTest executable and registers each of its tests with ctest under LABELS.
# Tests labelled `gpu` report GTEST_SKIP as a ctest skip, so they skip cleanly without a GPU.
function(milesrt_add_gtest target)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  gtest_discover_tests(${target}
    DISCOVERY_TIMEOUT 120
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
               SKIP_REGULAR_EXPRESSION "  SKIPPED ")  # gtest prints "[  SKIPPED ]"
endfunction()
