// TarStreamFilter: reads a POSIX (pax) tar archive as it streams by, passes on its members and
// drops the device nodes and FIFOs, counting what it saw.
//
// A host's root file system reaches this machine as `tar --create --format=posix` on its stdout
// (host_copy.h). The copy is extracted in a sandbox without CAP_MKNOD, where a device node would
// only be an extraction error, and a twin has no use for one (its /dev is the sandbox's own): so
// they are cut from the stream here, together with the extended headers that describe them, and
// counted. Everything else passes byte for byte. The filter also checks each header's checksum and
// type, so a stream that is not the archive we asked for is refused with the byte offset named,
// rather than handed on; it does not judge member names: the extraction's sandbox is the boundary
// for those (a "../x" or a planted symlink can only write inside it).
// Thread safety: one owner.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace temper::stig {

class TarStreamFilter {
 public:
  // Extended headers held for the member they describe, at most this many bytes (a file's xattrs
  // and ACLs take a few KiB).
  static constexpr std::size_t kMaxHeldBytes = std::size_t{16} << 20;

  // Takes the next bytes of the archive and appends to `out` what passes. Errors: InvalidArgument
  // naming the byte offset for a header with a bad checksum, a member type a file system copy never
  // holds, a size that is not a number, or extended headers over kMaxHeldBytes.
  Status Feed(std::string_view in, std::string& out);
  // After the last byte: InvalidArgument when the archive ended inside a member or before its
  // end-of-archive blocks.
  Status Finish() const;

  // Members passed on (files, directories, links) and device nodes or FIFOs dropped.
  std::uint64_t members() const { return members_; }
  std::uint64_t skipped_special() const { return skipped_special_; }
  // Whether the end-of-archive blocks have been seen (what follows is padding).
  bool ended() const { return state_ == State::kEnd; }
  // Bytes taken so far.
  std::uint64_t offset() const { return offset_; }

 private:
  enum class State { kHeader, kExtendedData, kMemberData, kEnd };

  Status TakeHeader(std::string_view block, std::string& out);
  Status TakeExtendedData();

  State state_ = State::kHeader;
  std::string block_;  // a header being gathered (up to 512 bytes)
  // Extended headers ('x', 'L', 'K') and their data, held until the member they describe shows
  // whether it passes.
  std::string held_;
  char extended_type_ = 0;           // the type of the extended header whose data is being read
  std::uint64_t extended_left_ = 0;  // its data still to come (padded to 512)
  std::uint64_t extended_size_ = 0;  // its data's own size
  std::uint64_t pax_size_ = 0;       // a "size=" record of the held 'x' header, 0 when none
  bool has_pax_size_ = false;
  std::uint64_t member_left_ = 0;  // a passed member's data still to pass (padded to 512)
  std::uint64_t offset_ = 0;
  std::uint64_t members_ = 0;
  std::uint64_t skipped_special_ = 0;
};

}  // namespace temper::stig
