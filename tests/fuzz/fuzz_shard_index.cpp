// A sharded checkpoint: the input is model.safetensors.index.json, in a
// directory that also holds two small valid shards, so an index can name
// real files, missing ones, paths that try to leave the directory, or the
// same tensor twice. Whatever opens must present each tensor once and read
// it inside its shard.

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/loader/safetensors_checkpoint.h"

using namespace hyllm;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fuzz::finding("cannot write a scratch file");
}

// A safetensors file holding F32 tensors of `floats` values each.
std::string shard_bytes(const std::vector<std::pair<std::string, int>>& tensors) {
  std::string header = "{";
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, floats] = tensors[i];
    uint64_t end = offset + 4 * static_cast<uint64_t>(floats);
    header += (i ? "," : "") + ("\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(floats) +
                                "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}");
    offset = end;
  }
  header += ",\"__metadata__\":{\"format\":\"pt\"}}";
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(offset, '\x01');
}

const fs::path& model_dir() {
  static const fs::path dir = [] {
    fs::path d = fuzz::scratch_dir() / "model";
    fs::create_directories(d);
    write_file(d / "model-00001-of-00002.safetensors",
               shard_bytes({{"model.embed_tokens.weight", 8}, {"model.layers.0.input_layernorm.weight", 2}}));
    write_file(d / "model-00002-of-00002.safetensors",
               shard_bytes({{"model.norm.weight", 2}, {"lm_head.weight", 8}, {"model.visual.patch_embed.weight", 1}}));
    fs::create_directories(d / "sub");
    write_file(d / "sub" / "x.safetensors", shard_bytes({{"model.layers.1.input_layernorm.weight", 2}}));
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& dir = model_dir();
  write_file(dir / "model.safetensors.index.json", fuzz::as_text(data, size));
  fuzz::expect_clean_errors([&] {
    auto ckpt = SafetensorsCheckpoint::open(dir);
    std::vector<std::byte> buf;
    for (const TensorInfo& t : ckpt->tensors()) {
      buf.resize(t.nbytes);
      ckpt->read(t.name, buf.data());
      for (std::byte b : buf) {
        if (b != std::byte{1}) fuzz::finding("a tensor read bytes outside its data");
      }
    }
    (void)ckpt->describe();
  });
  return 0;
}
