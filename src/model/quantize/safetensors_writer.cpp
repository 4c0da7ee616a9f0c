#include "model/quantize/safetensors_writer.h"

#include <cstdint>
#include <fstream>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace hyllm {

void write_safetensors(const std::filesystem::path& path, const std::vector<OwnedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // nlohmann's ordered_json keeps insertion order, so the header lists tensors
  // in the order of their bytes.
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    size_t want = static_cast<size_t>(t.shape.numel()) * dtype_size(t.dtype);
    HYLLM_CHECK(t.bytes.size() == want, "{}: {} bytes for shape {}", t.name, t.bytes.size(), t.shape.str());
    nlohmann::ordered_json e;
    e["dtype"] = dtype_safetensors_name(t.dtype);
    e["shape"] = std::vector<int64_t>(t.shape.begin(), t.shape.end());
    e["data_offsets"] = {offset, offset + t.bytes.size()};
    header[t.name] = e;
    offset += t.bytes.size();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(ErrorCode::kIo, "cannot write {}", path.string());
  uint64_t n = h.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : tensors) f.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  if (!f) fail(ErrorCode::kIo, "writing {} failed", path.string());
}

}  // namespace hyllm
