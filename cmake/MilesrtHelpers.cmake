# Small helpers shared by every folder's CMakeLists.txt: one way to declare a library and one way
# to register a test.

include(GoogleTest)

# milesrt_library(<name> [DIRS <folders...>] [SOURCES <files...>] [DEPS <targets...>]
#                 [PRIVATE_DEPS <targets...>] [TORCH])
# A static library from the .cpp files of DIRS (relative to the current folder; tests, fuzzers and
# mains left out) and SOURCES, linking DEPS publicly and PRIVATE_DEPS privately: a target lists the
# libraries it uses, and links only those. TORCH: the code includes libtorch, whose ATen header is
# precompiled once (for the first such library) and reused by the others.
function(milesrt_library name)
  cmake_parse_arguments(ARG "TORCH" "" "DIRS;SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(_sources ${ARG_SOURCES})
  foreach(_d ${ARG_DIRS})
    file(GLOB _s CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/${_d}/*.cpp")
    list(APPEND _sources ${_s})
  endforeach()
  list(FILTER _sources EXCLUDE REGEX "(\\.test\\.cpp|_fuzz\\.cpp|_main\\.cpp)$")
  add_library(${name} STATIC ${_sources})
  target_include_directories(${name} PUBLIC "${PROJECT_SOURCE_DIR}")
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  if(ARG_TORCH)
    target_link_libraries(${name} PUBLIC milesrt::torch)
    get_property(_pch GLOBAL PROPERTY MILESRT_TORCH_PCH)
    if(_pch)
      target_precompile_headers(${name} REUSE_FROM ${_pch})
    else()
      target_precompile_headers(${name} PRIVATE <ATen/ATen.h>)
      set_property(GLOBAL PROPERTY MILESRT_TORCH_PCH ${name})
    endif()
  endif()
endfunction()

# The tests' paths (test/support/paths.hpp), in one generated source file: every test's compile
# line stays free of this clone's folders, so the compiler cache serves clones in other folders.
function(_milesrt_test_paths)
  if(TARGET milesrt_test_paths)
    return()
  endif()
  set(_out "${CMAKE_BINARY_DIR}/test/test_paths.cpp")
  file(GENERATE OUTPUT "${_out}" CONTENT
"#include \"test/support/paths.hpp\"
namespace milesrt::test_paths {
const char* source_dir() { return \"${PROJECT_SOURCE_DIR}\"; }
const char* binary_dir() { return \"${CMAKE_BINARY_DIR}\"; }
const char* exe() { return \"$<TARGET_FILE:milesrt>\"; }
const char* python() { return \"${MILESRT_PYTHON}\"; }
const char* arith_make() { return \"$<TARGET_FILE:milesrt_arith_make>\"; }
const char* tokenizer_data() { return \"${CMAKE_BINARY_DIR}/test/tokenizer_data\"; }
}  // namespace milesrt::test_paths
")
  add_library(milesrt_test_paths STATIC "${_out}")
  target_include_directories(milesrt_test_paths PRIVATE "${PROJECT_SOURCE_DIR}")
endfunction()

# milesrt_add_gtest(<target> SOURCES <files...> [LIBS <libs...>] LABELS <labels...> [TIMEOUT s]
#                   [DEFINES <NAME=value...>] [NEEDS <targets...>])
# Builds one GoogleTest executable and registers each of its tests with ctest under LABELS.
# Every test sees the source tree on its include path and these paths as macros:
#   MILESRT_SOURCE_DIR, MILESRT_BINARY_DIR, MILESRT_EXE (the milesrt executable), MILESRT_PYTHON
#   (the venv with the oracles), MILESRT_ARITH_MAKE (the arithmetic example's maker),
#   MILESRT_TOKENIZER_DATA (the tokenizer oracle's data);
# DEFINES adds others, NEEDS names the targets that must be built before it runs.
# Tests labelled `gpu` report GTEST_SKIP as a ctest skip, so they skip cleanly without a GPU.
function(milesrt_add_gtest target)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;LABELS;DEFINES;NEEDS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${target} ${ARG_SOURCES})
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}")
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  _milesrt_test_paths()
  target_link_libraries(${target} PRIVATE milesrt_test_paths)
  target_compile_options(${target} PRIVATE
    "SHELL:-include ${PROJECT_SOURCE_DIR}/test/support/paths.hpp")
  target_compile_definitions(${target} PRIVATE
    MILESRT_SOURCE_DIR=::milesrt::test_paths::source_dir\(\)
    MILESRT_BINARY_DIR=::milesrt::test_paths::binary_dir\(\)
    MILESRT_EXE=::milesrt::test_paths::exe\(\)
    MILESRT_PYTHON=::milesrt::test_paths::python\(\)
    MILESRT_ARITH_MAKE=::milesrt::test_paths::arith_make\(\)
    MILESRT_TOKENIZER_DATA=::milesrt::test_paths::tokenizer_data\(\)
    ${ARG_DEFINES})
  if(ARG_NEEDS)
    add_dependencies(${target} ${ARG_NEEDS})
  endif()
  gtest_discover_tests(${target}
    DISCOVERY_TIMEOUT 120
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
               SKIP_REGULAR_EXPRESSION "  SKIPPED ")  # gtest prints "[  SKIPPED ]"
endfunction()
