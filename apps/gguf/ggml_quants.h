#pragma once
// ggml's Q8_0 block quantisation, as llama.cpp's converter and
// quantize_row_q8_0_ref write it, so that `hyllm export-gguf --outtype q8_0`
// gives llama.cpp the bytes its own converter would: per block of 32 values,
// d = max|x| / 127 stored as f16, codes round(x / d) (round half away from
// zero; all zeros when d = 0), the division done as a multiplication by the
// fp32 reciprocal 1 / d as ggml does.

#include <cstddef>
#include <cstdint>

namespace hyllm::gguf {

inline constexpr int64_t kQ8Block = 32;

// Quantises n values (a multiple of 32) into n / 32 blocks of 34 bytes.
void quantize_q8_0(const float* x, int64_t n, std::byte* out);
// The inverse, for checks: value i of the blocks.
float dequantize_q8_0(const std::byte* blocks, int64_t i);

}  // namespace hyllm::gguf
