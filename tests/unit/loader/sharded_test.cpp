// Sharded checkpoints whose index or shards disagree.

#include <gtest/gtest.h>

#include "model/loader/safetensors_checkpoint.h"
#include "tiny_model.h"

namespace hyllm {
namespace {

using nlohmann::json;
using namespace hyllm::testing;

std::string u8(size_t n) { return std::string(n, '\1'); }

void write_index(const std::filesystem::path& dir, const json& weight_map) {
  std::ofstream(dir / "model.safetensors.index.json") << json{{"weight_map", weight_map}}.dump();
}

TEST(Sharded, DuplicateNameAcrossShards) {
  auto dir = fresh_dir("dup_across");
  write_safetensors(dir / "a.safetensors", {{"model.norm.weight", "U8", {2}, u8(2)}});
  write_safetensors(dir / "b.safetensors", {{"model.norm.weight", "U8", {2}, u8(2)}, {"x", "U8", {1}, u8(1)}});
  write_index(dir, {{"model.norm.weight", "a.safetensors"}, {"x", "b.safetensors"}});
  Error e = expect_error([&] { SafetensorsCheckpoint::open(dir); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  std::string msg = e.what();
  EXPECT_NE(msg.find("model.norm.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("b.safetensors"), std::string::npos) << msg;
}

TEST(Sharded, DuplicateCanonicalName) {
  auto dir = fresh_dir("dup_canonical");
  write_safetensors(dir / "model.safetensors", {{"model.norm.weight", "U8", {2}, u8(2)},
                                                {"model.language_model.norm.weight", "U8", {2}, u8(2)}});
  Error e = expect_error([&] { SafetensorsCheckpoint::open(dir); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("both map to \"norm.weight\""), std::string::npos) << e.what();
}

TEST(Sharded, IndexPointsToMissingShard) {
  auto dir = fresh_dir("missing_shard");
  write_safetensors(dir / "a.safetensors", {{"w", "U8", {2}, u8(2)}});
  write_index(dir, {{"w", "a.safetensors"}, {"v", "model-00002-of-00002.safetensors"}});
  Error e = expect_error([&] { SafetensorsCheckpoint::open(dir); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_NE(std::string(e.what()).find("model-00002-of-00002.safetensors"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("model.safetensors.index.json"), std::string::npos) << e.what();
}

TEST(Sharded, IndexPlacesTensorInWrongShard) {
  auto dir = fresh_dir("wrong_shard");
  write_safetensors(dir / "a.safetensors", {{"w", "U8", {2}, u8(2)}});
  write_safetensors(dir / "b.safetensors", {{"v", "U8", {2}, u8(2)}});
  write_index(dir, {{"w", "b.safetensors"}, {"v", "a.safetensors"}});
  Error e = expect_error([&] { SafetensorsCheckpoint::open(dir); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("does not hold"), std::string::npos) << e.what();
}

TEST(Sharded, IndexWithPathOutsideTheDirectory) {
  for (const char* shard : {"../a.safetensors", "/etc/passwd", "sub/a.safetensors", ".."}) {
    auto dir = fresh_dir("traversal");
    write_index(dir, {{"w", shard}});
    Error e = expect_error([&] { SafetensorsCheckpoint::open(dir); });
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << shard;
  }
}

TEST(Sharded, MalformedIndex) {
  auto dir = fresh_dir("bad_index");
  std::ofstream(dir / "model.safetensors.index.json") << "{\"weight_map\": [";
  EXPECT_EQ(expect_error([&] { SafetensorsCheckpoint::open(dir); }).code(), ErrorCode::kCorruptData);
  std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << "{\"metadata\": {}}";
  EXPECT_EQ(expect_error([&] { SafetensorsCheckpoint::open(dir); }).code(), ErrorCode::kCorruptData);
  write_index(dir, {{"w", 3}});
  EXPECT_EQ(expect_error([&] { SafetensorsCheckpoint::open(dir); }).code(), ErrorCode::kCorruptData);
}

TEST(Sharded, CorruptShardNamesTheShard) {
  auto dir = fresh_dir("corrupt_shard");
  write_safetensors(dir / "a.safetensors", {{"w", "U8", {2}, u8(2)}});
  write_raw(dir / "b.safetensors", "{\"v\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", u8(8));
  write_index(dir, {{"w", "a.safetensors"}, {"v", "b.safetensors"}});
  Error e = expect_error([&] { SafetensorsCheckpoint::open(dir); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("b.safetensors"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("\"v\""), std::string::npos) << e.what();
}

TEST(Sharded, NoWeightsInDirectory) {
  auto dir = fresh_dir("no_weights");
  Error e = expect_error([&] { SafetensorsCheckpoint::open(dir); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_NE(std::string(e.what()).find("--load-format dummy"), std::string::npos);
  std::ofstream(dir / "pytorch_model.bin") << "x";
  ModelConfig c = parse_model_config(tiny_config_json(false));
  EXPECT_EQ(expect_error([&] { open_weights(dir, c, LoadFormat::kAuto); }).code(), ErrorCode::kUnsupported);
}

TEST(Sharded, GlobOfUnindexedFiles) {
  auto dir = fresh_dir("glob");
  write_safetensors(dir / "part-b.safetensors", {{"model.b", "U8", {1}, u8(1)}});
  write_safetensors(dir / "part-a.safetensors", {{"model.a", "U8", {1}, u8(1)}});
  auto ck = SafetensorsCheckpoint::open(dir);
  ASSERT_EQ(ck->tensors().size(), 2u);
  EXPECT_EQ(ck->tensors()[0].name, "a");  // files in name order
  EXPECT_TRUE(ck->contains("b"));
}

}  // namespace
}  // namespace hyllm
