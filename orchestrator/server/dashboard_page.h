// The dashboard's page (dashboard_page.html), compiled in so temperd serves it with no file to
// find at run time. The build makes dashboard_page.cpp from the HTML (see CMakeLists.txt).
#pragma once

#include <string_view>

namespace temper {

extern const std::string_view kDashboardPage;

}  // namespace temper
