#pragma once
// What the fuzz targets share: splitting one input into parts, files made
// from fuzz bytes, and the rule for exceptions.
//
// A target calls the code under test inside expect_clean_errors(): a
// hyllm::Error whose code says the input was bad is the expected outcome for
// bad input; any other exception (a library's own, std::out_of_range, an
// Error with kInternal) is a finding and aborts, so libFuzzer saves the input.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "util/log.h"
#include "util/status.h"

namespace hyllm::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The parts of `input` between NUL bytes, at most `max_parts` (the last part
// keeps any further NULs).
inline std::vector<std::string_view> split_nul(std::string_view input, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    size_t p = input.find('\0');
    if (p == std::string_view::npos) break;
    parts.push_back(input.substr(0, p));
    input.remove_prefix(p + 1);
  }
  parts.push_back(input);
  return parts;
}

// Well-formed UTF-8 (Unicode Table 3-7), written here independently of the
// code under test so that it can serve as an oracle.
inline bool is_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (b < 0x80) {
      ++i;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b1 < lo || b1 > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < 0x80 || c > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

// Runs fn; returns true when it finished without an exception, false when it
// threw an expected error. Aborts on anything else.
template <typename Fn>
bool expect_clean_errors(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInternal) finding(e.what());
    return false;
  } catch (const std::exception& e) {
    finding(e.what());
  }
}

// A file in memory holding `bytes`, reachable by path (/proc/self/fd/N), so
// code that opens and maps a path reads fuzz bytes without touching a disk.
class MemFile {
 public:
  explicit MemFile(std::string_view bytes) {
    fd_ = ::memfd_create("fuzz", MFD_CLOEXEC);
    if (fd_ < 0) finding("memfd_create failed");
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::write(fd_, bytes.data() + off, bytes.size() - off);
      if (n <= 0) finding("write to memfd failed");
      off += static_cast<size_t>(n);
    }
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  std::filesystem::path path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

// A directory of its own under the temporary directory, removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string templ = (std::filesystem::temp_directory_path() / "hyllm-fuzz-XXXXXX").string();
    if (!::mkdtemp(templ.data())) finding("mkdtemp failed");
    std::filesystem::path p = templ;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return p;
  }();
  return dir;
}

// Warnings about bad input are expected by the thousand; only a finding prints.
inline const bool kQuietLogs = [] {
  spdlog::set_level(spdlog::level::off);
  return true;
}();

inline std::filesystem::path source_dir() { return HYLLM_SOURCE_DIR; }
inline std::filesystem::path tiny_model_dir() { return source_dir() / "models" / "hyllm-tiny"; }

}  // namespace hyllm::fuzz
