#include "tensor/dtype.h"

namespace hyllm {

namespace {
struct DTypeInfo {
  DType type;
  size_t size;
  const char* name;
  const char* st_name;
  bool is_float;
};
constexpr DTypeInfo kInfo[] = {
    {DType::kF64, 8, "float64", "F64", true},
    {DType::kF32, 4, "float32", "F32", true},
    {DType::kF16, 2, "float16", "F16", true},
    {DType::kBF16, 2, "bfloat16", "BF16", true},
    {DType::kF8E4M3, 1, "float8_e4m3fn", "F8_E4M3", true},
    {DType::kF8E5M2, 1, "float8_e5m2", "F8_E5M2", true},
    {DType::kI64, 8, "int64", "I64", false},
    {DType::kI32, 4, "int32", "I32", false},
    {DType::kI16, 2, "int16", "I16", false},
    {DType::kI8, 1, "int8", "I8", false},
    {DType::kU64, 8, "uint64", "U64", false},
    {DType::kU32, 4, "uint32", "U32", false},
    {DType::kU16, 2, "uint16", "U16", false},
    {DType::kU8, 1, "uint8", "U8", false},
    {DType::kBool, 1, "bool", "BOOL", false},
};
const DTypeInfo& info(DType t) { return kInfo[static_cast<int>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
const char* dtype_name(DType t) { return info(t).name; }
const char* dtype_safetensors_name(DType t) { return info(t).st_name; }
bool dtype_is_float(DType t) { return info(t).is_float; }

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& i : kInfo) {
    if (name == i.st_name) return i.type;
  }
  return std::nullopt;
}

}  // namespace hyllm
