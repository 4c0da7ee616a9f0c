#pragma once
// Reads a whole .xz file (test data is committed xz-compressed).

#include <lzma.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

namespace hyllm::testing {

inline std::string read_xz_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  const std::string packed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, UINT64_MAX, 0) != LZMA_OK) throw std::runtime_error("lzma init failed");
  std::string out;
  char buf[1 << 16];
  strm.next_in = reinterpret_cast<const uint8_t*>(packed.data());
  strm.avail_in = packed.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    strm.next_out = reinterpret_cast<uint8_t*>(buf);
    strm.avail_out = sizeof(buf);
    ret = lzma_code(&strm, strm.avail_in ? LZMA_RUN : LZMA_FINISH);
    out.append(buf, sizeof(buf) - strm.avail_out);
  }
  lzma_end(&strm);
  if (ret != LZMA_STREAM_END) throw std::runtime_error("corrupt xz file " + path);
  return out;
}

}  // namespace hyllm::testing
