// The libopenscap headers stig/ uses, made includable from C++20.
//
// xccdf_benchmark.h (OpenSCAP 1.3.7) names function parameters `requires`, a C++20 keyword. The
// names are only parameter names, so renaming them while the headers are read changes nothing in
// the ABI. The headers also lack extern "C" guards. Include libopenscap through this header only.
#pragma once

#define requires oscap_requires_
extern "C" {
#include <ds_sds_session.h>
#include <oscap.h>
#include <oscap_error.h>
#include <oscap_reference.h>
#include <oscap_source.h>
#include <oval_definitions.h>
#include <xccdf_benchmark.h>
#include <xccdf_policy.h>
#include <xccdf_session.h>
}  // extern "C"
#undef requires

#include <string>

namespace temper::stig {

// libopenscap's getters return strings it keeps owning, or null.
inline std::string OscapText(const char* borrowed) { return borrowed ? borrowed : ""; }

}  // namespace temper::stig
