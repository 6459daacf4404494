// libFuzzer entry point for FixBundle::FromJson: a fix bundle comes from the store or the library of
// proven fixes, and may have been written elsewhere (an imported library, an edited export). Any
// input must give a bundle or an InvalidArgument Status; never a crash, a hang, a leak or an
// out-of-bounds read (ASan/UBSan watch). A bundle that reads must also write back and read again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "stig/fix_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  temper::Result<temper::stig::FixBundle> bundle = temper::stig::FixBundle::FromJson(input);
  if (!bundle.ok()) {
    if (bundle.status().code() != temper::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  temper::Result<temper::stig::FixBundle> again = temper::stig::FixBundle::FromJson(bundle->ToJson());
  // Not compared for equality: a path or link that is not UTF-8 comes back with replacement
  // characters (ToJson says so); it must still read.
  if (!again.ok()) std::abort();
  return 0;
}
