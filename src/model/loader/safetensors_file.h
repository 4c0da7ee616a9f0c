#pragma once
// One safetensors file, mapped read-only and validated before any use.
//
// Format: u64 little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"k": "v"}}
// then the data section; offsets are relative to its start.
//
// open() checks, and reports any failure as kCorruptData naming the file and,
// where there is one, the tensor: the header length is at most
// kMaxHeaderBytes and inside the file; the header is a JSON object with unique,
// valid UTF-8 names; every entry has a dtype string, a shape of at most
// Shape::kMaxDims non-negative extents and two offsets with
// begin <= end <= data size; entries do not overlap; for known dtypes,
// numel x element size (overflow-checked) equals end - begin. Entries with a
// dtype hyllm does not know keep dtype == nullopt (their bounds are still
// checked); using one is the caller's error to report.
//
// The mapping is read-only (PROT_READ): writing through a returned pointer
// faults. A file truncated by another process after open() can still raise
// SIGBUS on access; that is outside what validation can prevent.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace hyllm {

struct SafetensorsEntry {
  std::string name;                // as stored in the file
  std::optional<DType> dtype;      // nullopt: a dtype hyllm does not know
  std::string dtype_name;          // as stored, e.g. "BF16"
  Shape shape;
  uint64_t begin = 0;              // data-section offsets, [begin, end)
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  // Maps and validates. kNotFound when the file does not exist, kIo when it
  // cannot be read, kCorruptData when it is not a valid safetensors file.
  static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  // In file order (ascending begin).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // The entry's bytes inside the mapping; always in bounds by construction.
  std::span<const std::byte> bytes(const SafetensorsEntry& e) const;
  // Asks the kernel to start reading the entry's pages (MADV_WILLNEED).
  void prefetch(const SafetensorsEntry& e) const;

 private:
  SafetensorsFile() = default;
  void validate_and_index();

  std::filesystem::path path_;
  int fd_ = -1;
  const std::byte* map_ = nullptr;
  uint64_t file_size_ = 0;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
};

}  // namespace hyllm
