#include "model/loader/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "model/loader/tensor_names.h"
#include "util/json_depth.h"
#include "util/status.h"

namespace hyllm {

using nlohmann::json;

namespace {

std::string printable(std::string_view name) {
  // Names in messages are shown escaped so that hostile bytes cannot garble a log line.
  std::string out;
  for (unsigned char c : name.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return name.size() > 200 ? out + "..." : out;
}

// A header nests an object of tensors, each an object with arrays in it.
constexpr int kMaxHeaderDepth = 8;

// The raw text (escapes as written) of the keys of the header's top-level
// object, in one linear scan. nlohmann keeps the last of duplicate keys
// silently, and its parser callback, which could see them, rescans the
// enclosing object at every closing brace: quadratic in the tensor count.
std::vector<std::string_view> top_level_keys(std::string_view text) {
  std::vector<std::string_view> keys;
  int depth = 0;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      const size_t begin = ++i;
      while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      const size_t end = std::min(i, text.size());
      ++i;
      size_t next = i;
      auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
      while (next < text.size() && space(text[next])) ++next;
      if (depth == 1 && next < text.size() && text[next] == ':') keys.push_back(text.substr(begin, end - begin));
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    ++i;
  }
  return keys;
}

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) {
    int err = errno;
    fail(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo, "{}: cannot open: {}", path.string(),
         std::strerror(err));
  }
  struct stat st {};
  if (::fstat(f->fd_, &st) != 0) fail(ErrorCode::kIo, "{}: cannot stat: {}", path.string(), std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(ErrorCode::kCorruptData, "{}: not a regular file", path.string());
  f->file_size_ = static_cast<uint64_t>(st.st_size);
  if (f->file_size_ < 8) {
    fail(ErrorCode::kCorruptData, "{}: truncated: {} bytes, a safetensors file has at least 8", path.string(),
         f->file_size_);
  }
  void* m = ::mmap(nullptr, f->file_size_, PROT_READ, MAP_PRIVATE, f->fd_, 0);
  if (m == MAP_FAILED) fail(ErrorCode::kIo, "{}: mmap failed: {}", path.string(), std::strerror(errno));
  f->map_ = static_cast<const std::byte*>(m);
  ::madvise(m, f->file_size_, MADV_SEQUENTIAL);
  f->validate_and_index();
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<std::byte*>(map_), file_size_);
  if (fd_ >= 0) ::close(fd_);
}

std::span<const std::byte> SafetensorsFile::bytes(const SafetensorsEntry& e) const {
  return {map_ + data_start_ + e.begin, static_cast<size_t>(e.nbytes())};
}

void SafetensorsFile::prefetch(const SafetensorsEntry& e) const {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = (data_start_ + e.begin) / page * page;
  const uint64_t end = data_start_ + e.end;
  if (end > begin) ::madvise(const_cast<std::byte*>(map_) + begin, end - begin, MADV_WILLNEED);
}

void SafetensorsFile::validate_and_index() {
  const std::string file = path_.string();
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | std::to_integer<uint64_t>(map_[i]);
  if (header_len > kMaxHeaderBytes) {
    fail(ErrorCode::kCorruptData, "{}: header length {} exceeds the {} byte limit", file, header_len, kMaxHeaderBytes);
  }
  if (header_len > file_size_ - 8) {
    fail(ErrorCode::kCorruptData, "{}: truncated: header of {} bytes but the file has {} bytes after the length",
         file, header_len, file_size_ - 8);
  }
  data_start_ = 8 + header_len;
  const uint64_t data_size = file_size_ - data_start_;

  const std::string_view header_text(reinterpret_cast<const char*>(map_ + 8), header_len);
  // Destroying or walking a deeply nested value recurses once per level.
  if (!json_depth_within(header_text, kMaxHeaderDepth)) {
    fail(ErrorCode::kCorruptData, "{}: header nests deeper than {} levels", file, kMaxHeaderDepth);
  }
  json header = json::parse(header_text.begin(), header_text.end(), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail(ErrorCode::kCorruptData, "{}: header is not valid JSON (or not UTF-8)", file);
  if (!header.is_object()) fail(ErrorCode::kCorruptData, "{}: header is not a JSON object", file);
  const std::vector<std::string_view> keys = top_level_keys(header_text);
  if (keys.size() != header.size()) {
    std::unordered_set<std::string_view> seen;
    for (std::string_view k : keys) {
      if (!seen.insert(k).second) {
        fail(ErrorCode::kCorruptData, "{}: tensor \"{}\" appears twice in the header", file, printable(k));
      }
    }
    fail(ErrorCode::kCorruptData, "{}: a tensor name appears twice in the header (spelled with different escapes)",
         file);
  }

  entries_.reserve(header.size());
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(ErrorCode::kCorruptData, "{}: __metadata__ is not an object", file);
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(ErrorCode::kCorruptData, "{}: __metadata__ value of \"{}\" is not a string", file, printable(k));
      }
      continue;
    }
    // A named reference: clang 14 (the sanitizer build) cannot capture a structured binding.
    const std::string& tensor_name = name;
    auto bad = [&](const char* what) {
      fail(ErrorCode::kCorruptData, "{}: tensor \"{}\": {}", file, printable(tensor_name), what);
    };
    if (!is_valid_tensor_name(name)) bad("name is not valid UTF-8 text");
    if (!value.is_object()) bad("entry is not an object");
    SafetensorsEntry e;
    e.name = name;

    auto dt = value.find("dtype");
    if (dt == value.end() || !dt->is_string()) bad("missing or non-string \"dtype\"");
    e.dtype_name = dt->get<std::string>();
    e.dtype = dtype_from_safetensors(e.dtype_name);

    auto shape = value.find("shape");
    if (shape == value.end() || !shape->is_array()) bad("missing or non-list \"shape\"");
    if (shape->size() > static_cast<size_t>(Shape::kMaxDims)) bad("shape has too many dimensions");
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    bool numel_overflow = false;
    for (const json& d : *shape) {
      if (!d.is_number_unsigned()) bad("shape extents must be non-negative integers");
      uint64_t x = d.get<uint64_t>();
      if (x > static_cast<uint64_t>(INT64_MAX)) bad("shape extent too large");
      numel_overflow |= __builtin_mul_overflow(numel, x, &numel);
      dims.push_back(static_cast<int64_t>(x));
    }
    e.shape = Shape::from(dims.begin(), dims.end());

    auto offsets = value.find("data_offsets");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned()) {
      bad("\"data_offsets\" must be two non-negative integers");
    }
    e.begin = (*offsets)[0].get<uint64_t>();
    e.end = (*offsets)[1].get<uint64_t>();
    if (e.begin > e.end) bad("data_offsets begin after they end");
    if (e.end > data_size) {
      fail(ErrorCode::kCorruptData, "{}: tensor \"{}\": data_offsets [{}, {}) run past the data section ({} bytes; file truncated?)",
           file, printable(name), e.begin, e.end, data_size);
    }
    if (e.dtype) {
      uint64_t expected = 0;
      if (numel_overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(*e.dtype)), &expected)) {
        bad("shape x dtype size overflows");
      }
      if (expected != e.nbytes()) {
        fail(ErrorCode::kCorruptData, "{}: tensor \"{}\": {} {} needs {} bytes but data_offsets span {}", file,
             printable(name), e.dtype_name, e.shape.str(), expected, e.nbytes());
      }
    }
    entries_.push_back(std::move(e));
  }

  std::sort(entries_.begin(), entries_.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < entries_.size(); ++i) {
    const SafetensorsEntry& prev = entries_[i - 1];
    const SafetensorsEntry& cur = entries_[i];
    if (cur.begin < prev.end) {
      fail(ErrorCode::kCorruptData, "{}: tensors \"{}\" [{}, {}) and \"{}\" [{}, {}) overlap", file, printable(prev.name),
           prev.begin, prev.end, printable(cur.name), cur.begin, cur.end);
    }
  }
}

}  // namespace hyllm
