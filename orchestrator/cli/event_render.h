// One journal event as a line for people (`temper watch` without --json). The loop's own event types
// get a short sentence built from their data ("rule.fixed sysctl_kernel_dmesg_restrict after 2
// attempts"), each type's as the journal's vocabulary defines it (orchestrator/journal_event_types.h);
// any other type prints its data as JSON, so events added later still show everything.
#pragma once

#include <string>

#include "temper/v1/temper.pb.h"

namespace temper::cli {

// "    42  2026-11-22 21:50:01Z  batch 3  [daemon]  rule.fixed dmesg_restrict after 2 attempts\n".
// Long free text (approaches, lessons, command output) is cut to one line of at most 160 characters.
std::string RenderEvent(const temper::v1::JournalEvent& event);

// The part after the role: the type and what happened, without seq, time, batch or tokens.
std::string DescribeEvent(const temper::v1::JournalEvent& event);

}  // namespace temper::cli
