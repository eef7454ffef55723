#pragma once
// The folders and programs a test needs, defined in a source file the build generates
// (cmake/MilesrtHelpers.cmake). They are functions rather than string macros so that no test's
// compile line names a folder of this clone: the compiler cache then serves a clone in another
// folder. Every test sees them as the macros MILESRT_SOURCE_DIR, MILESRT_BINARY_DIR, MILESRT_EXE,
// MILESRT_PYTHON, MILESRT_ARITH_MAKE and MILESRT_TOKENIZER_DATA (const char*).

namespace milesrt::test_paths {

const char* source_dir();
const char* binary_dir();
const char* exe();
const char* python();
const char* arith_make();
const char* tokenizer_data();

}  // namespace milesrt::test_paths
