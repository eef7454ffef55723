#pragma once
/// The live page (runtime/metrics/page.html), embedded in the binary at build time: no file to
/// install, nothing fetched from elsewhere.

namespace milesrt::runtime {

extern const char page_html[];

}  // namespace milesrt::runtime
