// HeadlessBrowser: Debian's Chromium, headless, driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: JSON messages ending in a NUL byte, commands on the child's fd 3,
// replies and events on its fd 4), as Puppeteer drives it. Enough for a test to open a page, read
// what its scripts put in the DOM while the page lives, and keep a screenshot.
//
// Thread safety: one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace temper::testing {

inline constexpr const char* kChromium = "/usr/bin/chromium";

class HeadlessBrowser {
 public:
  // Starts Chromium with its profile in `profile_dir` and opens `url` in a new page.
  static Result<std::unique_ptr<HeadlessBrowser>> Open(const std::string& url, const std::string& profile_dir);
  ~HeadlessBrowser();  // closes the browser and reaps it
  HeadlessBrowser(const HeadlessBrowser&) = delete;
  HeadlessBrowser& operator=(const HeadlessBrowser&) = delete;

  // The value of `expression` in the page (Runtime.evaluate, by value).
  Result<nlohmann::json> Evaluate(const std::string& expression);
  // Polls `expression` every 100 ms until it is true; false at the deadline.
  bool WaitFor(const std::string& expression, std::chrono::milliseconds timeout);
  // A PNG of the page as it is, written to `path`.
  Status Screenshot(const std::string& path);

 private:
  HeadlessBrowser() = default;
  // Sends a command (to the page's session unless `browser_level`) and returns its result.
  Result<nlohmann::json> Call(const std::string& method, nlohmann::json params, bool browser_level = false);

  pid_t pid_ = -1;
  int to_browser_ = -1;
  int from_browser_ = -1;
  int next_id_ = 1;
  std::string session_;
  std::string pending_;  // bytes read past the last whole message
};

}  // namespace temper::testing
