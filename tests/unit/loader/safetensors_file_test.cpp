// Valid and corrupted single safetensors files.

#include "model/loader/safetensors_file.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>

#include "st_writer.h"

namespace hyllm {
namespace {

using nlohmann::json;
using testing::expect_error;
using testing::fresh_dir;
using testing::StTensor;
using testing::write_raw;
using testing::write_safetensors;

std::string f32_bytes(std::vector<float> v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

TEST(SafetensorsFile, ReadsValidFile) {
  auto dir = fresh_dir("valid");
  write_safetensors(dir / "a.safetensors", {{"b", "F32", {2}, f32_bytes({3, 4})},
                                            {"a", "BF16", {1, 2}, std::string("\x80\x3f\x00\x40", 4)},
                                            {"empty", "F32", {0, 3}, ""},
                                            {"scalar", "F32", {}, f32_bytes({7})}});
  auto f = SafetensorsFile::open(dir / "a.safetensors");
  ASSERT_EQ(f->entries().size(), 4u);
  // File order: by offset.
  EXPECT_EQ(f->entries()[0].name, "b");
  EXPECT_EQ(f->entries()[1].name, "a");
  const SafetensorsEntry& b = f->entries()[0];
  EXPECT_EQ(b.dtype, DType::kF32);
  EXPECT_EQ(b.shape, (Shape{2}));
  float got[2];
  std::memcpy(got, f->bytes(b).data(), 8);
  EXPECT_EQ(got[0], 3.0f);
  EXPECT_EQ(got[1], 4.0f);
  EXPECT_EQ(f->entries()[1].dtype, DType::kBF16);
  EXPECT_EQ(f->entries()[3].shape.rank(), 0);
}

TEST(SafetensorsFile, UnknownDtypeIsKeptButUntyped) {
  auto dir = fresh_dir("unknown_dtype");
  write_safetensors(dir / "a.safetensors", {{"x", "F8_E8M0", {4}, "abcd"}});
  auto f = SafetensorsFile::open(dir / "a.safetensors");
  ASSERT_EQ(f->entries().size(), 1u);
  EXPECT_FALSE(f->entries()[0].dtype.has_value());
  EXPECT_EQ(f->entries()[0].dtype_name, "F8_E8M0");
}

TEST(SafetensorsFile, MissingFileIsNotFound) {
  auto dir = fresh_dir("missing");
  Error e = expect_error([&] { SafetensorsFile::open(dir / "nope.safetensors"); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
}

// One corrupted file: how to write it, and the message part its error must have.
struct Corruption {
  const char* name;
  std::function<void(const std::filesystem::path&)> write;
  const char* message_part;
};

json entry(const char* dtype, std::vector<int64_t> shape, uint64_t begin, uint64_t end) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}
void write_header(const std::filesystem::path& p, const json& h, size_t data_bytes) {
  write_raw(p, h.dump(), std::string(data_bytes, '\0'));
}

// A header of many tensors parses in linear time (a parser callback made it
// quadratic: minutes for a few hundred thousand entries). These entries are
// refused once parsed; the bound is far above the linear time.
TEST(SafetensorsFile, AHeaderOfManyTensorsParsesInLinearTime) {
  auto path = fresh_dir("many_entries") / "model.safetensors";
  std::string header = "{";
  for (int i = 0; i < 300000; ++i) header += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"x\":1}";
  header += "}";
  write_raw(path, header, "");
  const auto t0 = std::chrono::steady_clock::now();
  Error e = expect_error([&] { SafetensorsFile::open(path); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << e.what();
  EXPECT_LT(seconds, 20.0);
}

class SafetensorsCorruption : public ::testing::TestWithParam<Corruption> {};

TEST_P(SafetensorsCorruption, IsCorruptDataNamingFileAndTensor) {
  const Corruption& c = GetParam();
  auto path = fresh_dir(std::string("corrupt_") + c.name) / "model.safetensors";
  c.write(path);
  Error e = expect_error([&] { SafetensorsFile::open(path); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << e.what();
  std::string msg = e.what();
  EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find(c.message_part), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Table, SafetensorsCorruption,
    ::testing::Values(
        Corruption{"empty_file", [](auto& p) { std::ofstream(p, std::ios::binary); }, "truncated"},
        Corruption{"short_length", [](auto& p) { std::ofstream(p, std::ios::binary) << "abc"; }, "truncated"},
        Corruption{"header_past_end", [](auto& p) { write_raw(p, "{}", "", 1000); }, "truncated"},
        Corruption{"huge_header", [](auto& p) { write_raw(p, "{}", "", 1ull << 40); }, "exceeds"},
        Corruption{"huge_header_u64_max", [](auto& p) { write_raw(p, "{}", "", UINT64_MAX); }, "exceeds"},
        Corruption{"not_json", [](auto& p) { write_raw(p, "{\"a\": [1, 2", ""); }, "not valid JSON"},
        Corruption{"json_array", [](auto& p) { write_raw(p, "[1, 2]", ""); }, "not a JSON object"},
        Corruption{"invalid_utf8_bytes", [](auto& p) { write_raw(p, "{\"w\xff\xfe\": {}}", ""); }, "not valid JSON"},
        Corruption{"overlong_utf8", [](auto& p) { write_raw(p, "{\"w\xc0\xaf\": {}}", ""); }, "not valid JSON"},
        Corruption{"control_char_name",
                   [](auto& p) { write_header(p, {{std::string("w\x01x"), entry("U8", {1}, 0, 1)}}, 1); },
                   "w\\x01x"},
        Corruption{"empty_name", [](auto& p) { write_header(p, {{"", entry("U8", {1}, 0, 1)}}, 1); }, "UTF-8"},
        Corruption{"duplicate_name",
                   [](auto& p) {
                     write_raw(p, R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                      "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                               std::string(2, '\0'));
                   },
                   "appears twice"},
        Corruption{"escaped_duplicate_name",
                   [](auto& p) {
                     write_raw(p, R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                      "\u0077": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                               std::string(2, '\0'));
                   },
                   "appears twice"},
        Corruption{"deep_nesting",
                   [](auto& p) {
                     write_raw(p, "{\"w\": " + std::string(100000, '[') + std::string(100000, ']') + "}", "");
                   },
                   "deeper than"},
        Corruption{"entry_not_object", [](auto& p) { write_header(p, {{"w", 5}}, 0); }, "\"w\""},
        Corruption{"missing_dtype",
                   [](auto& p) { write_header(p, {{"w", {{"shape", {1}}, {"data_offsets", {0, 1}}}}}, 1); }, "dtype"},
        Corruption{"missing_shape",
                   [](auto& p) { write_header(p, {{"w", {{"dtype", "U8"}, {"data_offsets", {0, 1}}}}}, 1); }, "shape"},
        Corruption{"missing_offsets", [](auto& p) { write_header(p, {{"w", {{"dtype", "U8"}, {"shape", {1}}}}}, 1); },
                   "data_offsets"},
        Corruption{"negative_dim", [](auto& p) { write_header(p, {{"w", entry("U8", {-1}, 0, 1)}}, 1); }, "non-negative"},
        Corruption{"float_dim", [](auto& p) { write_header(p, {{"w", {{"dtype", "U8"}, {"shape", {1.5}}, {"data_offsets", {0, 1}}}}}, 1); },
                   "non-negative"},
        Corruption{"too_many_dims", [](auto& p) { write_header(p, {{"w", entry("U8", {1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, 1)}}, 1); },
                   "too many dimensions"},
        Corruption{"numel_overflow",
                   [](auto& p) { write_header(p, {{"w", entry("F32", {1ll << 40, 1ll << 40}, 0, 4)}}, 4); }, "overflow"},
        Corruption{"bytes_overflow",
                   [](auto& p) { write_header(p, {{"w", entry("F64", {1ll << 61}, 0, 8)}}, 8); }, "overflow"},
        Corruption{"wrong_dtype_size", [](auto& p) { write_header(p, {{"w", entry("F32", {2}, 0, 4)}}, 4); },
                   "needs 8 bytes but data_offsets span 4"},
        Corruption{"offsets_reversed", [](auto& p) { write_header(p, {{"w", entry("U8", {0}, 4, 2)}}, 8); },
                   "begin after"},
        Corruption{"offsets_past_end", [](auto& p) { write_header(p, {{"w", entry("U8", {16}, 0, 16)}}, 8); },
                   "run past the data section"},
        Corruption{"truncated_data",
                   [](auto& p) {
                     write_header(p, {{"a", entry("F32", {4}, 0, 16)}, {"b", entry("F32", {4}, 16, 32)}}, 20);
                   },
                   "\"b\""},
        Corruption{"negative_offset",
                   [](auto& p) { write_header(p, {{"w", {{"dtype", "U8"}, {"shape", {1}}, {"data_offsets", {-1, 0}}}}}, 1); },
                   "data_offsets"},
        Corruption{"overlapping",
                   [](auto& p) {
                     write_header(p, {{"a", entry("F32", {4}, 0, 16)}, {"b", entry("F32", {2}, 8, 16)}}, 16);
                   },
                   "overlap"},
        Corruption{"metadata_not_object", [](auto& p) { write_header(p, {{"__metadata__", 3}}, 0); }, "__metadata__"},
        Corruption{"metadata_non_string",
                   [](auto& p) { write_header(p, {{"__metadata__", {{"k", 1}}}}, 0); }, "__metadata__"}),
    [](const ::testing::TestParamInfo<Corruption>& info) { return std::string(info.param.name); });

TEST(SafetensorsFile, PaddedHeaderWithTrailingSpacesIsValid) {
  auto dir = fresh_dir("padded");
  json h = {{"w", entry("U8", {2}, 0, 2)}};
  write_raw(dir / "a.safetensors", h.dump() + "      ", "xy");
  auto f = SafetensorsFile::open(dir / "a.safetensors");
  ASSERT_EQ(f->entries().size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->bytes(f->entries()[0]).data()), 2), "xy");
}

}  // namespace
}  // namespace hyllm
