#pragma once
// A writer for GGUF version 3, the file format llama.cpp loads: a header,
// typed key/value metadata, a table of tensors (name, dims in ggml order:
// fastest-varying first, element type, offset) and the tensor data, each
// tensor aligned to `kGgufAlignment` bytes. Tensors are produced one at a
// time while the file is written, so a model larger than host memory can be
// exported.
//
// Written here rather than taken from llama.cpp: its own writer is Python
// (gguf-py) or part of ggml, which the hyllm binary does not link.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace hyllm::gguf {

inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint64_t kGgufAlignment = 32;  // llama.cpp's default (general.alignment unset)

// ggml tensor element types used here (ggml.h's enum ggml_type). Q8_0 is a
// block type: 32 values as an f16 scale and 32 int8 codes (ggml_quants.h).
enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
// Values per block (1 for the plain float types) and bytes per block.
int64_t ggml_block_size(GgmlType t);
size_t ggml_type_size(GgmlType t);
// Bytes of n values (n a multiple of the block size).
uint64_t ggml_row_size(GgmlType t, int64_t n);
const char* ggml_type_name(GgmlType t);

// GGUF metadata value types (gguf.h's enum gguf_type).
enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

class GgufWriter {
 public:
  // Fills exactly the tensor's byte size.
  using Producer = std::function<void(std::span<std::byte> out)>;

  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);

  // `ne` in ggml order: ne[0] is the contiguous dimension (a row-major
  // [rows, cols] matrix is ne = {cols, rows}), a multiple of the type's block
  // size. Names are unique.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne, Producer produce);

  // Writes the file; `on_tensor(i, n, name)` reports progress after each tensor.
  void write(const std::filesystem::path& path,
             const std::function<void(size_t, size_t, const std::string&)>& on_tensor = {}) const;

  size_t num_tensors() const { return tensors_.size(); }
  uint64_t data_bytes() const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    Producer produce;
  };
  void begin_kv(const std::string& key, GgufValueType type);

  std::string kv_;  // serialized key/value pairs
  uint64_t kv_count_ = 0;
  std::vector<std::string> keys_;
  std::vector<Tensor> tensors_;
};

}  // namespace hyllm::gguf
