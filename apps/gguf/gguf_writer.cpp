#include "gguf/gguf_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "util/status.h"

namespace hyllm::gguf {

namespace {

// GGUF is little-endian; so is every machine hyllm runs on.
template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

uint64_t padded(uint64_t n) { return (n + kGgufAlignment - 1) / kGgufAlignment * kGgufAlignment; }

}  // namespace

int64_t ggml_block_size(GgmlType t) { return t == GgmlType::kQ8_0 ? 32 : 1; }

size_t ggml_type_size(GgmlType t) {
  switch (t) {
    case GgmlType::kF32: return 4;
    case GgmlType::kF16:
    case GgmlType::kBF16: return 2;
    case GgmlType::kQ8_0: return 2 + 32;
  }
  return 0;
}

uint64_t ggml_row_size(GgmlType t, int64_t n) {
  return static_cast<uint64_t>(n / ggml_block_size(t)) * ggml_type_size(t);
}

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::kF32: return "f32";
    case GgmlType::kF16: return "f16";
    case GgmlType::kQ8_0: return "q8_0";
    case GgmlType::kBF16: return "bf16";
  }
  return "?";
}

void GgufWriter::begin_kv(const std::string& key, GgufValueType type) {
  if (std::find(keys_.begin(), keys_.end(), key) != keys_.end())
    fail(ErrorCode::kInternal, "GGUF key {} written twice", key);
  keys_.push_back(key);
  put_string(kv_, key);
  put<uint32_t>(kv_, static_cast<uint32_t>(type));
  ++kv_count_;
}

void GgufWriter::add_u32(const std::string& key, uint32_t v) {
  begin_kv(key, GgufValueType::kU32);
  put(kv_, v);
}

void GgufWriter::add_i32(const std::string& key, int32_t v) {
  begin_kv(key, GgufValueType::kI32);
  put(kv_, v);
}

void GgufWriter::add_f32(const std::string& key, float v) {
  begin_kv(key, GgufValueType::kF32);
  put(kv_, v);
}

void GgufWriter::add_bool(const std::string& key, bool v) {
  begin_kv(key, GgufValueType::kBool);
  put<uint8_t>(kv_, v ? 1 : 0);
}

void GgufWriter::add_string(const std::string& key, const std::string& v) {
  begin_kv(key, GgufValueType::kString);
  put_string(kv_, v);
}

void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  begin_kv(key, GgufValueType::kArray);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufValueType::kI32));
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put(kv_, x);
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  begin_kv(key, GgufValueType::kArray);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufValueType::kString));
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_string(kv_, s);
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne, Producer produce) {
  for (const Tensor& t : tensors_)
    if (t.name == name) fail(ErrorCode::kInternal, "GGUF tensor {} added twice", name);
  if (ne.empty() || ne.size() > 4) fail(ErrorCode::kInternal, "GGUF tensor {}: {} dims", name, ne.size());
  uint64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0) fail(ErrorCode::kInternal, "GGUF tensor {}: dimension {}", name, d);
    n *= static_cast<uint64_t>(d);
  }
  if (ne[0] % ggml_block_size(type) != 0)
    fail(ErrorCode::kUnsupported, "GGUF tensor {}: rows of {} values do not split into {} blocks of {}", name, ne[0],
         ggml_type_name(type), ggml_block_size(type));
  const uint64_t nbytes = ggml_row_size(type, ne[0]) * (n / static_cast<uint64_t>(ne[0]));
  tensors_.push_back({name, type, std::move(ne), nbytes, std::move(produce)});
}

uint64_t GgufWriter::data_bytes() const {
  uint64_t total = 0;
  for (const Tensor& t : tensors_) total += padded(t.nbytes);
  return total;
}

void GgufWriter::write(const std::filesystem::path& path,
                       const std::function<void(size_t, size_t, const std::string&)>& on_tensor) const {
  std::string head;
  head += "GGUF";
  put<uint32_t>(head, kGgufVersion);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kv_count_);
  head += kv_;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, offset);
    offset += padded(t.nbytes);
  }
  head.resize(padded(head.size()), '\0');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(ErrorCode::kIo, "cannot create {}", path.string());
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  std::vector<std::byte> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    // The producer writes all t.nbytes; only the alignment padding is zeroed
    // here (a fill of the whole buffer per tensor doubles the export's passes).
    if (buf.size() < padded(t.nbytes)) buf.resize(padded(t.nbytes));
    std::fill(buf.begin() + static_cast<std::ptrdiff_t>(t.nbytes),
              buf.begin() + static_cast<std::ptrdiff_t>(padded(t.nbytes)), std::byte{0});
    t.produce(std::span<std::byte>(buf.data(), t.nbytes));
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(padded(t.nbytes)));
    if (!out) fail(ErrorCode::kIo, "writing {} failed (disk full?)", path.string());
    if (on_tensor) on_tensor(i + 1, tensors_.size(), t.name);
  }
  out.close();
  if (!out) fail(ErrorCode::kIo, "closing {} failed", path.string());
}

}  // namespace hyllm::gguf
