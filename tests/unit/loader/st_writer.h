#pragma once
// Test helper: writes safetensors files, well-formed or deliberately broken.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "util/status.h"

namespace hyllm::testing {

struct StTensor {
  std::string name;
  std::string dtype;  // "BF16", ...
  std::vector<int64_t> shape;
  std::string bytes;  // raw data
};

// Writes [u64 header length][header][data] with header_len taken from the
// header unless overridden.
inline void write_raw(const std::filesystem::path& path, const std::string& header, const std::string& data,
                      std::optional<uint64_t> header_len = std::nullopt) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header_len.value_or(header.size());
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
}

inline nlohmann::json header_for(const std::vector<StTensor>& tensors, std::string* data) {
  nlohmann::json h = nlohmann::json::object();
  for (const StTensor& t : tensors) {
    uint64_t begin = data->size();
    *data += t.bytes;
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data->size()}}};
  }
  h["__metadata__"] = {{"format", "pt"}};
  return h;
}

inline void write_safetensors(const std::filesystem::path& path, const std::vector<StTensor>& tensors) {
  std::string data;
  nlohmann::json h = header_for(tensors, &data);
  write_raw(path, h.dump(), data);
}

// A fresh empty directory for one test.
inline std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::path(::testing::TempDir()) / ("hyllm_loader_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs fn and returns the hyllm::Error it throws (fails the test if none).
template <typename Fn>
Error expect_error(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an hyllm::Error";
  return Error(ErrorCode::kOk, "");
}

}  // namespace hyllm::testing
