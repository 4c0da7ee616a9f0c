#pragma once
// A checkpoint of one or more mmap'd safetensors files, presented under
// canonical names (tensor_names.h). Vision-tower and MTP tensors are left
// out; every file is validated by SafetensorsFile::open before use.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/loader/safetensors_file.h"
#include "model/loader/weight_source.h"

namespace hyllm {

class SafetensorsCheckpoint : public WeightSource {
 public:
  // The weights of a model directory: the shards named by
  // model.safetensors.index.json when it exists, else model.safetensors, else
  // every *.safetensors file. kNotFound when there are none.
  //
  // The index must be a JSON object whose "weight_map" maps names to shard
  // file names in the same directory (no path separators); each shard must
  // exist (kNotFound) and hold the tensors the index places in it
  // (kCorruptData). A name in two files, or two names with the same canonical
  // name, is kCorruptData naming both.
  static std::unique_ptr<SafetensorsCheckpoint> open(const std::filesystem::path& model_dir);
  // These files, in this order (no index).
  static std::unique_ptr<SafetensorsCheckpoint> open_files(const std::vector<std::filesystem::path>& files);

  // Whether the directory holds safetensors weights at all.
  static bool has_safetensors(const std::filesystem::path& model_dir);

  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  void read(const std::string& name, void* host_dst) const override;
  std::optional<std::span<const std::byte>> mapped(const std::string& name) const override;
  std::string describe() const override;
  void prefetch(const std::string& name) const override;

  // Removes tensors from tensors() (e.g. those a check found unneeded).
  void drop(const std::vector<std::string>& names);

 private:
  SafetensorsCheckpoint() = default;
  void add_file(std::unique_ptr<SafetensorsFile> file);
  void finish();

  struct Location {
    size_t file;
    const SafetensorsEntry* entry;
  };
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<TensorInfo> tensors_;
  std::vector<Location> locations_;  // parallel to tensors_
  std::string where_;                // "N files in DIR" for describe()
};

}  // namespace hyllm
