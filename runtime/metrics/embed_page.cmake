# cmake -DIN=page.html -DOUT=page_assets.cpp -P embed_page.cmake: the page as a C++ raw string.
file(READ "${IN}" _page)
file(WRITE "${OUT}" "// Generated from runtime/metrics/page.html by embed_page.cmake.\n#include \"runtime/metrics/page_assets.hpp\"\nnamespace milesrt::runtime {\nextern const char page_html[] = R\"milesrt_page(${_page})milesrt_page\";\n}  // namespace milesrt::runtime\n")
