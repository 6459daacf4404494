// LayerDiff: what one overlayfs layer changes over the layers below it, read from the layers'
// directories (no mount needed).
//
// A layer holds more than its changes: overlayfs copies a directory up (same owner, mode and
// xattrs) whenever something inside it changes, so every layer repeats /etc when it edits a file
// there. Taking a layer out of a stack is safe only when no layer above it holds one of the paths
// it really changed; copied-up parents are not changes and must not count as conflicts. So:
//   - a non-directory entry (file, symlink, whiteout, device) is always a change;
//   - a directory is a change when it is opaque (its lower contents were replaced), when nothing
//     or a non-directory lies below it, or when its owner, group, mode or xattrs differ from the
//     directory below (timestamps are ignored: copy-ups and file creation move them).
// Lookups below follow overlayfs: whiteouts (character devices 0/0) delete, opaque directories
// (xattr trusted.overlay.opaque = "y") hide everything beneath them in lower layers.
// Thread safety: pure functions over the file system; the layers must not change meanwhile.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace temper::stig {

// Paths ("/etc/login.defs") that `layer` changes over `lower` (directories, top first; the base
// root last), sorted. IOError when a layer cannot be read.
Result<std::vector<std::string>> LayerChanges(const std::string& layer, const std::vector<std::string>& lower);

// The directory of `layers` (top first, the base root last) that overlayfs would show `path`
// ("/etc/audit/audit.rules") from, following whiteouts and opaque directories; nullopt when the
// stack holds nothing there.
std::optional<std::string> LayerShowing(const std::vector<std::string>& layers, const std::string& path);

// Whether the directory at `upper` (a layer's entry), stacked over the directory at `lower`
// (another layer's entry for the same path), shows what both hold: it is not opaque and has the
// lower's owner, group and mode. False when either is not a directory.
bool DirectoriesStack(const std::string& upper, const std::string& lower);

// Every path `layer` holds, copied-up directories included, sorted. IOError as above.
Result<std::vector<std::string>> LayerEntries(const std::string& layer);

}  // namespace temper::stig
