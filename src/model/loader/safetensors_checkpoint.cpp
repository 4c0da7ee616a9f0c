#include "model/loader/safetensors_checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "model/loader/tensor_names.h"
#include "util/log.h"

namespace hyllm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";

std::vector<fs::path> all_safetensors(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec)) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool is_plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\\') == std::string::npos &&
         is_valid_tensor_name(s);
}

}  // namespace

bool SafetensorsCheckpoint::has_safetensors(const fs::path& model_dir) {
  std::error_code ec;
  return fs::exists(model_dir / kIndexName, ec) || !all_safetensors(model_dir).empty();
}

std::unique_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(ErrorCode::kNotFound, "{}: not a directory", dir.string());
  const fs::path index_path = dir / kIndexName;
  if (!fs::exists(index_path, ec)) {
    if (fs::exists(dir / "model.safetensors", ec)) {
      auto ckpt = open_files({dir / "model.safetensors"});
      ckpt->where_ = (dir / "model.safetensors").string();
      return ckpt;
    }
    std::vector<fs::path> files = all_safetensors(dir);
    if (files.empty()) {
      fail(ErrorCode::kNotFound, "{}: no safetensors weights (model.safetensors, {} or *.safetensors); "
           "use --load-format dummy for random weights", dir.string(), kIndexName);
    }
    auto ckpt = open_files(files);
    ckpt->where_ = fmt::format("{} files in {}", files.size(), dir.string());
    return ckpt;
  }

  const json index = read_json_file(index_path);
  const std::string where = index_path.string();
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object()) {
    fail(ErrorCode::kCorruptData, "{}: required object \"weight_map\" is missing", where);
  }
  std::map<std::string, std::vector<std::string>> names_by_shard;
  for (const auto& [name, shard] : index.at("weight_map").items()) {
    if (!shard.is_string() || !is_plain_file_name(shard.get<std::string>())) {
      fail(ErrorCode::kCorruptData, "{}: weight_map entry for \"{}\" is not a file name in the model directory", where,
           name);
    }
    names_by_shard[shard.get<std::string>()].push_back(name);
  }
  if (names_by_shard.empty()) fail(ErrorCode::kCorruptData, "{}: weight_map is empty", where);

  std::unique_ptr<SafetensorsCheckpoint> ckpt(new SafetensorsCheckpoint());
  for (const auto& [shard, names] : names_by_shard) {
    fs::path path = dir / shard;
    if (!fs::exists(path, ec)) {
      fail(ErrorCode::kNotFound, "{}: shard {} (holding e.g. \"{}\") does not exist", where, shard, names.front());
    }
    auto file = SafetensorsFile::open(path);
    std::unordered_set<std::string_view> present;
    for (const SafetensorsEntry& e : file->entries()) present.insert(e.name);
    for (const std::string& name : names) {
      if (!present.contains(name)) {
        fail(ErrorCode::kCorruptData, "{}: index places \"{}\" in {} but that file does not hold it", where, name, shard);
      }
    }
    size_t unlisted = file->entries().size() - names.size();
    if (unlisted > 0) log::warn("{}: {} holds {} tensor(s) the index does not list; loading them too", where, shard, unlisted);
    ckpt->add_file(std::move(file));
  }
  ckpt->where_ = fmt::format("{} shards in {}", names_by_shard.size(), dir.string());
  ckpt->finish();
  return ckpt;
}

std::unique_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open_files(const std::vector<fs::path>& files) {
  std::unique_ptr<SafetensorsCheckpoint> ckpt(new SafetensorsCheckpoint());
  for (const fs::path& f : files) ckpt->add_file(SafetensorsFile::open(f));
  ckpt->where_ = files.size() == 1 ? files[0].string() : fmt::format("{} files", files.size());
  ckpt->finish();
  return ckpt;
}

void SafetensorsCheckpoint::add_file(std::unique_ptr<SafetensorsFile> file) {
  files_.push_back(std::move(file));
}

void SafetensorsCheckpoint::finish() {
  // Names must be unique across files, both as stored and once canonical.
  std::unordered_map<std::string_view, size_t> raw_owner;
  std::unordered_map<std::string, std::pair<size_t, std::string_view>> canonical_owner;
  for (size_t f = 0; f < files_.size(); ++f) {
    const SafetensorsFile& file = *files_[f];
    for (const SafetensorsEntry& e : file.entries()) {
      auto [it, fresh] = raw_owner.emplace(e.name, f);
      if (!fresh) {
        fail(ErrorCode::kCorruptData, "tensor \"{}\" is in both {} and {}", e.name, files_[it->second]->path().string(),
             file.path().string());
      }
      std::optional<std::string> canonical = canonical_tensor_name(e.name);
      if (!canonical) continue;  // vision tower, MTP head
      auto [cit, cfresh] = canonical_owner.emplace(*canonical, std::make_pair(f, std::string_view(e.name)));
      if (!cfresh) {
        fail(ErrorCode::kCorruptData, "tensors \"{}\" ({}) and \"{}\" ({}) both map to \"{}\"", cit->second.second,
             files_[cit->second.first]->path().string(), e.name, file.path().string(), *canonical);
      }
      if (!e.dtype) {
        fail(ErrorCode::kCorruptData, "{}: tensor \"{}\" has dtype \"{}\", which hyllm does not know",
             file.path().string(), e.name, e.dtype_name);
      }
      tensors_.push_back({*canonical, *e.dtype, e.shape, static_cast<size_t>(e.nbytes()),
                          file.path().string() + ": " + e.name});
      locations_.push_back({f, &e});
    }
  }
  index_tensors();
}

void SafetensorsCheckpoint::drop(const std::vector<std::string>& names) {
  std::unordered_set<std::string_view> gone(names.begin(), names.end());
  std::vector<TensorInfo> kept;
  std::vector<Location> kept_locations;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (gone.contains(tensors_[i].name)) continue;
    kept.push_back(std::move(tensors_[i]));
    kept_locations.push_back(locations_[i]);
  }
  tensors_ = std::move(kept);
  locations_ = std::move(kept_locations);
  index_tensors();
}

std::optional<std::span<const std::byte>> SafetensorsCheckpoint::mapped(const std::string& name) const {
  const TensorInfo& t = info(name);
  const Location& loc = locations_[static_cast<size_t>(&t - tensors_.data())];
  return files_[loc.file]->bytes(*loc.entry);
}

void SafetensorsCheckpoint::prefetch(const std::string& name) const {
  const TensorInfo& t = info(name);
  const Location& loc = locations_[static_cast<size_t>(&t - tensors_.data())];
  files_[loc.file]->prefetch(*loc.entry);
}

void SafetensorsCheckpoint::read(const std::string& name, void* host_dst) const {
  std::span<const std::byte> bytes = *mapped(name);
  std::memcpy(host_dst, bytes.data(), bytes.size());
}

std::string SafetensorsCheckpoint::describe() const { return "safetensors (" + where_ + ")"; }

}  // namespace hyllm
