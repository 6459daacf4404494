#include "common/text_cut.h"

#include <fmt/format.h>

namespace temper {

std::string CutWithMarker(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  // The marker's length with the widest count it can carry, so the result never passes max_bytes.
  const size_t marker_bytes = fmt::format("…[cut by temper: {} of {} bytes left out]", text.size(), text.size()).size();
  size_t keep = max_bytes > marker_bytes ? max_bytes - marker_bytes : 0;
  // text[keep] is the first byte left out: never a UTF-8 continuation byte.
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return fmt::format("{}…[cut by temper: {} of {} bytes left out]", text.substr(0, keep), text.size() - keep,
                     text.size());
}

}  // namespace temper
