// OvalCriteriaText: a rule's OVAL check written out for a model to act on, from the first attempt.
//
// A Worker told only "OVAL xccdf_..._accounts_tmout: Set Interactive Session Timeout (tests:
// textfilecontent54)" must guess which file the scanner reads and what it expects there; told the
// criteria it can write exactly what passes. (gemma-forge's fix rate went from about 62% to about
// 90% mainly by putting each rule's description and OVAL criteria in front of the model.) Each
// test is written as its type and comment, the object it examines (file path or directory and
// name pattern, the line pattern, the package, unit or setting name, with each entity's
// operation), what at least must exist (check_existence) and the state the found items must be in
// (each state entity with its operation and datatype), and criteria as ALL / ANY / ONE / an odd
// number, negated with NOT, extended definitions inlined with their titles. Values taken from
// variables are named by the variable's id (an XCCDF value's is bound only at evaluation).
//
// Content is untrusted: nesting is capped, and the text stops at `max_bytes` with a marker saying
// so.
// Thread safety: a pure function of the model it reads (which must stay loaded meanwhile).
#pragma once

#include <cstddef>
#include <string>

struct oval_definition;  // libopenscap's (stig/scap/oscap_api.h), kept out of this header's users

namespace temper::stig {

inline constexpr std::size_t kMaxCriteriaBytes = 6000;

std::string OvalCriteriaText(struct oval_definition* definition, std::size_t max_bytes = kMaxCriteriaBytes);

}  // namespace temper::stig
