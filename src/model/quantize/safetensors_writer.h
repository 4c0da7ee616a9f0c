#pragma once
// Writes one safetensors file: u64 little-endian header length, the JSON
// header (names in the given order, data offsets relative to the data start,
// padded with spaces to 8 bytes), then the tensors' bytes packed in order.

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace hyllm {

struct OwnedTensor {
  std::string name;
  DType dtype = DType::kBF16;
  Shape shape;
  std::vector<std::byte> bytes;
};

void write_safetensors(const std::filesystem::path& path, const std::vector<OwnedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace hyllm
