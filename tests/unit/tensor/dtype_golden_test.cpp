// hyllm's conversions against PyTorch's, recorded by tools/dtype_goldens.py
// on the CPU and on CUDA (tests/data/tensor/dtype_goldens.bin).

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "tensor/dtype.h"

namespace hyllm {
namespace {

class Goldens {
 public:
  Goldens() {
    auto path = std::filesystem::path(HYLLM_SOURCE_DIR) / "tests/data/tensor/dtype_goldens.bin";
    std::ifstream in(path, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
    if (bytes_.size() < 16 || bytes_.compare(0, 8, "HYDTYPE1") != 0) throw std::runtime_error("bad golden file");
    size_t pos = 8;
    uint32_t meta_len = u32(pos);
    meta_ = nlohmann::json::parse(bytes_.substr(pos + 4, meta_len));
    pos += 4 + meta_len;
    n_ = u32(pos);
    pos += 4;
    inputs_ = pos;
    pos += 4 * static_cast<size_t>(n_);
    for (const auto& s : meta_.at("sections")) {
      std::string name = s.get<std::string>();
      size_t width = name.ends_with(".decode") ? 4 : (name.ends_with("bf16") || name.ends_with("fp16")) ? 2 : 1;
      size_t count = name.ends_with(".decode") ? 256 : n_;
      sections_[name] = pos;
      pos += width * count;
    }
    if (pos != bytes_.size()) throw std::runtime_error("golden file size mismatch");
  }

  uint32_t n() const { return n_; }
  float input(size_t i) const {
    float f;
    std::memcpy(&f, bytes_.data() + inputs_ + 4 * i, 4);
    return f;
  }
  // Element i of a section, widened.
  uint32_t at(const std::string& section, size_t i, size_t width) const {
    uint32_t v = 0;
    std::memcpy(&v, bytes_.data() + sections_.at(section) + width * i, width);
    return v;
  }
  std::string torch_version() const { return meta_.at("torch"); }

 private:
  uint32_t u32(size_t pos) const {
    uint32_t v;
    std::memcpy(&v, bytes_.data() + pos, 4);
    return v;
  }
  std::string bytes_;
  nlohmann::json meta_;
  uint32_t n_ = 0;
  size_t inputs_ = 0;
  std::map<std::string, size_t> sections_;
};

const Goldens& goldens() {
  static const Goldens g;
  return g;
}

struct Case {
  const char* format;
  size_t width;
  uint32_t (*encode)(float);
  float (*decode)(uint32_t);
};

const Case kCases[] = {
    {"bf16", 2, [](float x) -> uint32_t { return f32_to_bf16(x); },
     [](uint32_t b) { return bf16_to_f32(static_cast<uint16_t>(b)); }},
    {"fp16", 2, [](float x) -> uint32_t { return f32_to_f16(x); },
     [](uint32_t b) { return f16_to_f32(static_cast<uint16_t>(b)); }},
    {"e4m3", 1, [](float x) -> uint32_t { return f32_to_f8e4m3(x); },
     [](uint32_t b) { return f8e4m3_to_f32(static_cast<uint8_t>(b)); }},
    {"e5m2", 1, [](float x) -> uint32_t { return f32_to_f8e5m2(x); },
     [](uint32_t b) { return f8e5m2_to_f32(static_cast<uint8_t>(b)); }},
};

// Bit-exact on every input, except that where PyTorch gives a NaN hyllm must
// give a NaN too, its payload aside (the bits of a NaN differ between
// PyTorch's CPU and CUDA paths).
void compare(const char* device) {
  const Goldens& g = goldens();
  ASSERT_GT(g.n(), 30000u);
  for (const Case& c : kCases) {
    std::string section = std::string(device) + "." + c.format;
    int mismatches = 0, nans = 0;
    for (size_t i = 0; i < g.n(); ++i) {
      const float x = g.input(i);
      const uint32_t want = g.at(section, i, c.width);
      const uint32_t got = c.encode(x);
      if (std::isnan(c.decode(want))) {
        ++nans;
        if (!std::isnan(c.decode(got))) ++mismatches;
        continue;
      }
      if (got != want && ++mismatches <= 5) {
        ADD_FAILURE() << section << ": x = " << x << " (0x" << std::hex << detail::f32_bits(x) << "): torch 0x" << want
                      << ", hyllm 0x" << got;
      }
    }
    EXPECT_EQ(mismatches, 0) << section << " (torch " << g.torch_version() << ")";
    EXPECT_GT(nans, 0) << section << ": the golden set should probe NaN results";
  }
}

TEST(DTypeGoldens, MatchTorchCpu) { compare("cpu"); }
TEST(DTypeGoldens, MatchTorchCuda) { compare("cuda"); }

// Decoding is bit-exact with PyTorch's CPU path, NaN bits included; CUDA
// writes canonical NaNs (0x7fffffff) for e5m2, so there only NaN-ness is compared.
TEST(DTypeGoldens, Fp8DecodeMatchesTorch) {
  const Goldens& g = goldens();
  for (const char* device : {"cpu", "cuda"}) {
    const bool exact_nans = std::string(device) == "cpu";
    for (int code = 0; code < 256; ++code) {
      const auto c = static_cast<uint8_t>(code);
      for (auto [section, got] : {std::pair{std::string(device) + ".e4m3.decode", f8e4m3_to_f32(c)},
                                  std::pair{std::string(device) + ".e5m2.decode", f8e5m2_to_f32(c)}}) {
        uint32_t want = g.at(section, code, 4);
        if (!exact_nans && std::isnan(detail::f32_from_bits(want))) {
          EXPECT_TRUE(std::isnan(got)) << section << " code " << code;
        } else {
          EXPECT_EQ(detail::f32_bits(got), want) << section << " code " << code;
        }
      }
    }
  }
}

}  // namespace
}  // namespace hyllm
